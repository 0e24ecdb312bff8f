"""Device memory: how much a cell needs at its size, how much a device has, and whether the cell fits. The one rule
(HEADROOM): a cell fits a device when its predicted peak is at most 90% of the device's memory; the other 10% is for
what the prediction does not count (the CUDA or CANN context, the caching allocator's unused blocks, cuBLAS and cuDNN
workspaces, the driver's reserve).

The need is predicted on the CPU, never on a device, and read here from the committed PREDICTIONS file (made by
`python tools/predict_memory.py`, slow): each model's PyTorch workload, built from its folder as a cell builds it at
the accelerator profile's batch, sequence and data, trains its first steps under FakeTensorMode (every tensor has its
shape, dtype and device, none has storage), and PyTorch's MemTracker adds up the live tensors' bytes after every
operator: the peak of parameters, gradients, optimizer state and activations, at fp32 and under autocast (bf16 on the
CPU, the same two bytes as a device's fp16). Every other cell of the model takes that figure, labelled: PyTorch's
compile cells their eager twin's, MindSpore's cells their PyTorch twin's (fp32 for AMP off, autocast's for O2 and
O3), and a data-parallel cell adds one copy of the gradients (DistributedDataParallel's buckets, per device).
 What a device has: its memory as sold (DEVICES: harness.devices.catalog's sizes, the vendors' figures), or the
host's own device as NVML, nvidia-smi or npu-smi report it (harness.devices.query.host_memory), read once when a run
starts. harness.host.plan.Host asks `plan` for every cell, so the runner knows before a cell starts how it runs there,
and `harness list` / `harness estimate` say the same:
- its whole batch at once where it fits;
- else, for a model that accumulates gradients (contracts.AccumulatingModel), its batch as k micro-batches of
  batch / k, k the smallest divisor of the batch from 2 up whose micro-batch fits: the cell's accumulation_steps, one
  optimiser step per batch (the model's files; harness/models/_pytorch.py accumulate, _mindspore.py Accumulating).
  A micro-batch's need is the line through the model's two traces with accumulation (the gradients' sums held
  through the next micro-batch's forward pass), at micro-batches of a half and a quarter of its batch;
- else it is skipped before it starts, with the reason (a BatchNorm model's NO_ACCUMULATION, or even a micro-batch
  of one too large).
HARNESS_DEVICE_MEMORY=off plans nothing for memory (a run that measures what a prediction rules out);
HARNESS_ACCUMULATION_STEPS=k takes every cell of an accumulating model in k micro-batches whatever the memory (a test
or a trial of the accumulated step on a host that needs none), and skips, with the reason, the other models' cells.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.cell import Cell
from harness.config.spec import ModelSpec
from harness.devices import accumulation, catalog
from harness.devices.accumulation import FORCE
from harness.errors import HarnessError
from harness.paths import HARNESS

PREDICTIONS = Path(__file__).with_name("devicememory.json")
REGENERATE = "python tools/predict_memory.py"
OFF = "HARNESS_DEVICE_MEMORY=off"   # runs every cell whatever its prediction: to measure one the prediction rules out
TRAINS = ("model", "scaling")
HEADROOM = 0.9
SCHEMA = 1
MODELS_DIR = HARNESS / "models"
# Hyperparameters that size nothing (rates and schedules): changing one leaves a prediction current.
NOT_SIZES = frozenset({"lr", "momentum", "weight_decay", "warmup_epochs", "warmup_steps", "adam_beta1", "adam_beta2",
                       "adam_eps", "bn_momentum_pt", "bn_eps", "dropout", "clip_norm", "mask_rate"})


# The memory table: the catalog's sizes (harness.devices.catalog), the vendors' figures as sold.
Device = catalog.Device
DEVICES = catalog.sizes()


def device(name: str) -> Device:
    """The table's device for a name: a key of DEVICES (V100-16), or a device name as nvidia-smi, npu-smi or the
    estimate's bookings give it ('Tesla V100-SXM2-32GB', Ascend910B; harness.devices.catalog.match); a HarnessError
    for one the table lacks or whose name does not say its memory ('Tesla V100')."""
    found = catalog.sized(name)
    if found is None:
        raise HarnessError(f"--device {name!r}: no such device in the memory table; name one of: "
                           f"{', '.join(DEVICES)}")
    return found


def table_gib(name: str | None) -> tuple[float | None, str]:
    """(GiB, source) of a named device from the table; (None, why) for a name it lacks."""
    found = catalog.sized(name)
    if found is None:
        return None, f"{name or 'the device'} is not in the memory table"
    return float(found.gib), f"{found.name} as sold"


def switched_off() -> bool:
    return os.environ.get("HARNESS_DEVICE_MEMORY") == "off"


def usable(gib: float) -> float:
    return HEADROOM * gib


def fits(need_gib: float, have_gib: float) -> bool:
    return need_gib <= usable(have_gib)


@functools.cache
def load(path: Path = PREDICTIONS) -> dict[str, Any]:
    """The committed predictions ({} where the file is missing: nothing is then skipped for memory)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise HarnessError(f"{path} cannot be read ({e}); restore it from git or run `{REGENERATE}`") from None
    if data.get("schema") != SCHEMA:
        raise HarnessError(f"{path} has schema {data.get('schema')!r}, this harness reads {SCHEMA}; run "
                           f"`{REGENERATE}`")
    return data


def precision(amp: str) -> str:
    """The predictions' word for the cell's precision (harness.devices.catalog.precision): "fp32", or "amp" for
    autocast's trace."""
    return catalog.TRACED[catalog.precision(amp)]


@dataclass(frozen=True)
class Need:
    gib: float
    basis: str    # what the figure is: the cell's own trace, or whose figure it borrows


def _traced(cell: Cell, predictions: dict[str, Any] | None) -> dict[str, Any] | None:
    """The file's entry for the cell's model at its precision; None for a cell it does not cover."""
    entry = (load() if predictions is None else predictions).get("models", {}).get(cell.model or "")
    if cell.kind not in TRAINS or not entry or precision(cell.amp) not in entry:
        return None
    return entry[precision(cell.amp)]


def _with_basis(cell: Cell, got: dict[str, Any], peak_bytes: float, traced: str) -> Need:
    """A peak of the cell's model as the cell's own need: whose figure it is, and per device of a data-parallel
    cell one copy of the gradients more."""
    gib, basis = peak_bytes / 2**30, traced
    if cell.framework == "mindspore":
        basis = "its PyTorch twin's figure"
    elif cell.mode != "eager":
        basis = "its eager twin's figure"
    if cell.devices > 1:
        gib += got["parts_bytes"]["parameters"] / 2**30   # fp32 gradients are the parameters' size, AMP or not
        basis += ", plus DistributedDataParallel's buckets (one copy of the gradients)"
    return Need(gib, basis)


def need(cell: Cell, predictions: dict[str, Any] | None = None) -> Need | None:
    """The cell's predicted peak device memory, per device, with its whole batch at once; None for a cell the file
    does not cover (operators, inference, passes, a model not predicted yet)."""
    got = _traced(cell, predictions)
    return None if got is None else _with_basis(cell, got, got["peak_bytes"], "PyTorch eager, traced")


def micro_need(cell: Cell, micro: int, predictions: dict[str, Any] | None = None) -> Need | None:
    """The cell's predicted peak with its batch taken in micro-batches of `micro` (gradient accumulation): the line
    through the model's two accumulated traces (tools/predict_memory.py's "accumulated": peak bytes at two
    micro-batches), at `micro`; None where the file has no such traces for it."""
    got = _traced(cell, predictions)
    acc = (got or {}).get("accumulated")
    if not acc:
        return None
    (a, b), (pa, pb) = acc["micro_batches"], acc["peak_bytes"]
    per_sample = (pa - pb) / (a - b)
    return _with_basis(cell, got, pa + per_sample * (micro - a),
                       f"PyTorch eager, the line through its accumulated traces at micro-batches of {a} and {b}")


@dataclass(frozen=True)
class Plan:
    """How a cell runs on a device: its batch in `steps` micro-batches (1: at once), or skipped, and why."""
    steps: int = 1
    skip: str | None = None     # the reason its skipped result records; None where it runs
    need: Need | None = None    # the predicted peak at that micro-batch, where predicted
    batch: int | None = None    # the cell's batch (per device), where it has one

    @property
    def label(self) -> str | None:
        return accumulation.label(self.batch, self.steps) if self.steps > 1 and self.batch else None


def _batch(cell: Cell) -> int | None:
    batch = cell.spec.hparams.get("batch") if isinstance(cell.spec, ModelSpec) else None
    return int(batch) if batch else None


def plan(cell: Cell, have_gib: float | None, predictions: dict[str, Any] | None = None) -> Plan:
    """How the cell runs on a device of `have_gib` (None: not known, or a CPU): the one answer Host.verdict, the
    runner, `harness list` and the estimate read. HARNESS_ACCUMULATION_STEPS comes first, then the memory."""
    forced = accumulation.forced_steps()
    if forced is None or cell.kind not in TRAINS or not cell.model:
        return by_memory(cell, have_gib, predictions)
    batch, why = _batch(cell), accumulation.refusal(cell.model)
    if forced == 1:
        return Plan(batch=batch)
    if why:
        return Plan(skip=f"{FORCE}={forced} asks for gradient accumulation, which {cell.model} does not do: {why}",
                    batch=batch)
    if not batch or batch % forced:
        return Plan(skip=f"{FORCE}={forced} does not divide {cell.model}'s batch of {batch} into equal micro-batches",
                    batch=batch)
    return Plan(forced, need=micro_need(cell, batch // forced, predictions), batch=batch)


def by_memory(cell: Cell, have_gib: float | None, predictions: dict[str, Any] | None = None) -> Plan:
    """The plan the device's memory makes (plan without HARNESS_ACCUMULATION_STEPS): the whole batch where it fits,
    else the fewest micro-batches that fit, else a skip with its reason."""
    n, batch = need(cell, predictions), _batch(cell)
    if have_gib is None or n is None or fits(n.gib, have_gib):
        return Plan(need=n, batch=batch)
    whole = (f"predicted to need {n.gib:.1f} GiB of device memory ({n.basis}; harness/devices/devicememory.json), more than "  # noqa: E501
             f"{HEADROOM:.0%} of this device's {have_gib:.1f} GiB")
    why = accumulation.refusal(str(cell.model))
    one = micro_need(cell, 1, predictions) if batch and not why else None
    if why:
        return Plan(skip=f"{whole}, and it cannot take its batch in micro-batches ({why}); {_fix(n.gib)}",
                    batch=batch)
    if one is None:
        return Plan(skip=f"{whole}; harness/devices/devicememory.json has no prediction of its micro-batches (run "
                         f"`{REGENERATE} --only {cell.model}`); {_fix(n.gib)}", batch=batch)
    for k in (k for k in range(2, batch + 1) if batch % k == 0):
        micro = micro_need(cell, batch // k, predictions)
        if micro is not None and fits(micro.gib, have_gib):
            return Plan(k, need=micro, batch=batch)
    return Plan(skip=f"{whole}, and with gradient accumulation even a micro-batch of 1 is predicted at "
                     f"{one.gib:.1f} GiB ({one.basis}); {_fix(one.gib, ', in micro-batches')}", batch=batch)


def _fix(gib: float, how: str = "") -> str:
    """What a skip reason tells the user to do: the least device that holds `gib`, or the switch."""
    smallest = next((d.name for d in sorted(DEVICES.values(), key=lambda d: d.gib) if fits(gib, d.gib)), None)
    return (f"run it on a device of at least {gib / HEADROOM:.1f} GiB" + (f" ({smallest} or larger)" if smallest
            else "") + how + f", or with {OFF} to try it here")


def too_big(cell: Cell, have_gib: float | None, predictions: dict[str, Any] | None = None) -> str | None:
    """Why the cell cannot run on a device of `have_gib`, even with gradient accumulation (the reason its skipped
    result records), or None."""
    return by_memory(cell, have_gib, predictions).skip


def fingerprint(spec: ModelSpec, model: str) -> str:
    """What a prediction depends on: the sizes of the model's settings (not its rates), its data and the model
    package's code (its __init__.py and pytorch.py, which the trace runs). Another fingerprint: a stale prediction."""
    sizes = {k: v for k, v in spec.to_dict()["hparams"].items() if k not in NOT_SIZES}
    code = {f: hashlib.sha256((MODELS_DIR / model / f).read_bytes()).hexdigest() for f in ("__init__.py", "pytorch.py")}
    blob = json.dumps({"hparams": sizes, "dataset": spec.dataset, "train_samples": spec.train_samples, "code": code},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def stale(model_specs: dict[str, ModelSpec], predictions: dict[str, Any] | None = None) -> list[str]:
    """The models whose committed prediction is missing or was made for other sizes or code."""
    have = (load() if predictions is None else predictions).get("models", {})
    return sorted(m for m, spec in model_specs.items()
                  if m not in have or have[m].get("fingerprint") != fingerprint(spec, m))


@dataclass(frozen=True)
class Row:
    """The cells of one model, precision and kind (1 device, or data-parallel): they share one predicted figure."""
    model: str
    precision: str
    size: str             # batch x sequence, as the profile sets them
    parallel: bool        # data-parallel cells (per device: plus the gradients' buckets)
    gib: float
    cells: tuple[Cell, ...]


def rows(cells: list[Cell], predictions: dict[str, Any] | None = None) -> list[Row]:
    """The profile's predicted cells grouped by the figure they share, in the profile's model order."""
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        n = need(c, predictions)
        if n is not None:
            groups.setdefault((c.model, precision(c.amp), c.devices > 1, n.gib), []).append(c)
    out = []
    for (model, prec, parallel, gib), group in groups.items():
        hp = group[0].spec.hparams
        size = " x ".join(str(hp[k]) for k in ("batch", "max_len") if k in hp) or "whole graph"
        out.append(Row(model, prec, size, parallel, gib, tuple(group)))
    return out


def fit_table(cells: list[Cell], predictions: dict[str, Any] | None = None) -> list[str]:
    """What `harness list` and `harness estimate` print: each row's predicted GiB and whether it fits each device."""
    found = rows(cells, predictions)
    if not found:
        return ["device memory: no prediction covers these cells (harness/devices/devicememory.json)"]
    names = list(DEVICES)
    head = f"{'model':10} {'precision':9} {'batch x seq':11} {'devices':7} {'GiB':>6} {'cells':>5}  " + \
        " ".join(f"{n:>8}" for n in names)
    out = [f"device memory, predicted on the CPU ({REGENERATE}); a cell fits a device where it needs at most "
           f"{HEADROOM:.0%} of its memory; KxM: it takes its batch as K micro-batches of M (gradient accumulation):",
           head]
    for r in found:
        out.append(f"{r.model:10} {r.precision:9} {r.size:11} {'2+ each' if r.parallel else '1':7} {r.gib:6.2f} "
                   f"{len(r.cells):5}  " + " ".join(f"{_fit(r.cells[0], DEVICES[n].gib, predictions):>8}"
                                                    for n in names))
    return out


def _fit(cell: Cell, have_gib: float, predictions: dict[str, Any] | None) -> str:
    p = by_memory(cell, have_gib, predictions)
    return "SKIP" if p.skip else f"{p.steps}x{p.batch // p.steps}" if p.steps > 1 and p.batch else "fits"
