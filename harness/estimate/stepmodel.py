"""How long a planned cell will take, from the step times a committed run measured (docs/runs/<platform>-<profile>):
the estimate of a profile too long to have run whole on the reference host (the accelerator profile), and of a host
other than the one the reference ran on (a V100 from an H200's run, an Ascend 910 server).

A measured cell (a "donor") is taken apart into what its result recorded: its first epoch's training seconds
(autotuning, compilation), the seconds per sample of the epochs after it, the seconds per epoch spent outside
training (evaluation: the child's wall time less its training time, over its epochs) and the seconds outside the
child's run (process start, building, the profiled pass: elapsed less wall). A planned cell takes the donor of its own
id where the reference measured it; else the nearest by model, precision, framework and mode, and its time is the
donor's parts at the planned cell's samples per epoch, epochs and devices:

    fixed + f * first + epochs * samples / devices * per_sample * step * r + f * epochs * eval

`first`: the first epoch's time beyond its samples at the later pace (autotuning, compilation). `epochs`: what the
donor ran where it stopped at its target with the same settings and data, else the planned epochs (an upper bound).
`f`: the device factor (harness.estimate.devicescale): 1 on the donor's own device kind; the two devices' measured
ratio for the model and precision where both have committed measurements, and then `step` = f (the whole step was
measured); else the slower of their dense-peak and memory-bandwidth ratios, and `step` = max(1, busy * f). `busy`: the
share of the donor's step its device was busy (its profiled pass's device timeline), 1 where unmeasured: a host-bound
step (on an H200, PyTorch's ResNet50 at batch 128) is scaled only in its device part; without that share an estimate for
a slower device is long. `r`: 1, but for a MindSpore cell priced from a PyTorch donor (no committed accelerator run
measured MindSpore): MindSpore's training step over PyTorch's as the committed CPU runs measured it
(harness.estimate.frameworkratio), a weak proxy for a device's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import median
from typing import Any

from harness import profiling
from harness.config.cell import Cell
from harness.config.spec import ModelSpec
from harness.devices import catalog
from harness.devices.query import run_device
from harness.estimate import devicescale
from harness.results.store import RunStore
from harness.scenarios.operator import turns

ALL = "*"   # in a set of synthetic datasets: every dataset


def train_split(dataset: str | None) -> int | None:
    """The real training split's size (a dataset file's SIZES["train"]), where the spec sets no train_samples: a
    reference run made on a synthetic stand-in (CIFAR-10's has 5,000 images) is scaled to the real split."""
    if not dataset:
        return None
    from harness import data

    try:
        return (getattr(data.module(dataset), "SIZES", None) or {}).get("train")
    except Exception:   # noqa: BLE001 - an estimate never stops a run
        return None


@dataclass(frozen=True)
class Donor:
    cell: str
    model: str | None
    framework: str
    mode: str
    amp: str
    kind: str
    elapsed_s: float
    fixed_s: float            # outside the child's run: start, build, profiled pass
    first_s: float            # the first epoch's training seconds beyond its samples at the later epochs' pace
    per_sample_s: float       # seconds per training sample over the epochs after the first
    eval_s: float             # seconds per epoch outside training (evaluation)
    samples: int              # training samples per epoch (all ranks)
    epochs_run: int
    reached_target: bool
    devices: int
    device: str | None
    busy: float = 1.0         # the share of a step the device was busy (its profiled pass), 1 where not measured
    ok: bool = True           # False: a cell that failed after training (its epochs' step times still hold)
    planned: int | None = None  # the epochs it was to train (its spec's; None for a cell without epochs)
    pass_s: float = 0.0       # its profiled pass (in fixed_s too), where it had one
    profiled_step_s: float | None = None   # a step under the profiler
    autotuned: bool = False   # cuDNN's autotuning ran in its first epoch (settings["cudnn.benchmark"])
    periods: int = 1          # evaluations per epoch (its spec's evals_per_epoch): each recorded "epoch" is one period
    eval_n: int | None = None  # the samples each evaluation read (its spec's val_samples or eval_samples), where set
    shapes: int = 1           # the batch shapes it trained on (length buckets), each a graph to compile


def evals(spec: dict[str, Any] | ModelSpec | None) -> int | None:
    """The samples one evaluation reads: val_samples, else eval_samples; None where neither is set (the whole split)."""
    get = spec.get if isinstance(spec, dict) else (lambda k: getattr(spec, k, None))
    return get("val_samples") or get("eval_samples") or None


def shapes(hparams: Any) -> int:
    """The batch shapes a model trains on: one per length bucket below its max_len, and max_len's (hparam `buckets`,
    the GRU's); 1 without buckets. A graph-mode framework compiles one graph per shape, so the first epoch's extra
    time scales with it."""
    hp = dict(hparams or {})
    widths = [int(w) for w in hp.get("buckets") or []]
    top = hp.get("max_len")
    return len({w for w in widths if top is None or w < int(top)}) + 1


def _pass(r: dict[str, Any]) -> tuple[float, float | None]:
    """(the seconds its profiled pass took, a profiled step's seconds): `pass_s` where the result records it, else its
    profiled steps at their step time (a pass recorded before pass_s was)."""
    prof = r.get("profile") or {}
    if not isinstance(prof, dict) or not prof:
        return 0.0, None
    step = prof.get("profiled_step_s")
    if prof.get("pass_s") is not None:
        return float(prof["pass_s"]), step
    return (float(prof.get("steps") or 0) * float(step or 0.0)), step


def _busy(r: dict[str, Any]) -> float | None:
    """The device's busy share of the measured step (the profiled pass's device timeline: harness.profiling), where
    the cell has one."""
    prof = r.get("profile") or {}
    device = prof.get("device") if isinstance(prof, dict) else None
    share = device.get("measured_busy_share") if isinstance(device, dict) else None
    return float(share) if isinstance(share, int | float) and 0 < share <= 1 else None


def _donor(r: dict[str, Any], device: str | None, spec: dict[str, Any] | None = None) -> Donor | None:
    epochs = [e for e in r.get("epochs") or [] if e.get("train_s") and e.get("samples")]
    elapsed = turns.own_seconds(r)   # an operator cell timed by turns: its share of its group's time
    ok = r.get("status") == "ok"
    if not elapsed or not (ok or epochs):   # a failed cell's trained epochs are step times all the same
        return None
    if not epochs:   # an operator, inference or passes cell: its time is its elapsed time
        return Donor(r["cell"], r.get("model"), r.get("framework") or "", r.get("mode") or "", r.get("amp") or "off",
                     r.get("kind") or "", elapsed, elapsed, 0.0, 0.0, 0.0, 0, 0, False, r.get("devices") or 1, device)
    train = sum(e["train_s"] for e in epochs)
    wall = r.get("wall_s") or train
    pass_s, profiled_step = _pass(r)
    later = epochs[1:]
    per_sample = (sum(e["train_s"] for e in later) / sum(e["samples"] for e in later) if later
                  else epochs[0]["train_s"] / epochs[0]["samples"])
    sp = ((spec or {}).get("cell") or {}).get("spec") or {}   # what the child was asked (r<k>.spec.json)
    return Donor(r["cell"], r.get("model"), r.get("framework") or "", r.get("mode") or "", r.get("amp") or "off",
                 r.get("kind") or "", elapsed, max(elapsed - wall, 0.0),
                 max(epochs[0]["train_s"] - epochs[0]["samples"] * per_sample, 0.0), per_sample,
                 max(wall - train, 0.0) / len(epochs), int(epochs[0]["samples"]), len(epochs),
                 r.get("time_to_target_s") is not None and r.get("best_metric") is not None
                 and r.get("target") is not None and r["best_metric"] >= r["target"],
                 r.get("devices") or 1, device, _busy(r) or 1.0, ok, r.get("epochs_planned"), pass_s, profiled_step,
                 bool((r.get("settings") or {}).get("cudnn.benchmark")), int(sp.get("evals_per_epoch") or 1),
                 evals(sp), shapes(sp.get("hparams")))


def donors(run: Path | Sequence[Path]) -> dict[str, Donor]:
    """Each cell of one or more run folders as a donor (its repeat of median elapsed time; an ok repeat before a
    failed one; a later folder's cell before an earlier one's)."""
    if not isinstance(run, Path):
        pool: dict[str, Donor] = {}
        for one in run:
            pool.update(donors(one))
        return pool
    store = RunStore(run)
    device = run_device(store.read_meta().get("platform"), store.read_env())
    results = store.results()
    by_cell: dict[str, list[Donor]] = {}
    for r in results:
        d = _donor(r, device, store.read_spec(r["cell"], r.get("repeat", 0)) if r.get("epochs") else None)
        if d is not None:
            by_cell.setdefault(d.cell, []).append(d)
    out = {}
    for cid, ds in by_cell.items():
        ds = [d for d in ds if d.ok] or ds
        mid = median(d.elapsed_s for d in ds)
        out[cid] = min(ds, key=lambda d: abs(d.elapsed_s - mid))
    # Only the fp32 cells are profiled: a cell without a busy share takes its model's profiled one (at fp32 the device
    # does more of the step than in mixed precision, so the share is on the high side and the estimate long).
    shares = {}
    for r in results:
        b = _busy(r) if r.get("status") == "ok" else None
        if b is not None and r["cell"] in out:
            shares.setdefault(out[r["cell"]].model, b)
    return {cid: d if d.busy < 1.0 or d.model not in shares else replace(d, busy=shares[d.model])
            for cid, d in out.items()}


def pick(cell: Cell, pool: dict[str, Donor]) -> tuple[Donor | None, str]:
    """The donor for a planned cell and how near it is: 'measured' (its own id), 'like' (same model and precision,
    another framework or mode), 'model' (same model, another precision), 'kind' (an operator or companion cell of the
    same kind), or (None, 'none')."""
    if cell.id in pool and pool[cell.id].ok and (
            not isinstance(cell.spec, ModelSpec) or pool[cell.id].planned in (None, cell.spec.epochs)):
        return pool[cell.id], "measured"   # the same cell at the same settings
    if cell.kind in ("model", "scaling"):
        same_kind = [d for d in pool.values() if d.model == cell.model and d.kind in ("model", "scaling")]
        prec = catalog.precision(cell.amp)
        like = [d for d in same_kind if catalog.precision(d.amp) == prec]
        for group, how in ((like, "like"), (same_kind, "model")):
            if group:   # the same framework and mode first, then the same framework, then PyTorch eager's
                return min(group, key=lambda d: (d.framework != cell.framework, d.mode != cell.mode,
                                                 d.mode != "eager", d.devices != 1, d.cell)), how
        return None, "none"
    kin = [d for d in pool.values() if d.kind == cell.kind]
    if kin:
        mid = median(d.elapsed_s for d in kin)
        return min(kin, key=lambda d: abs(d.elapsed_s - mid)), "kind"
    return None, "none"


def planned_samples(cell: Cell, donor: Donor, synthetic: bool, donor_synthetic: bool) -> int:
    """Training samples per epoch (all ranks) the planned cell will see."""
    spec = cell.spec
    if not isinstance(spec, ModelSpec):
        return donor.samples
    split = train_split(spec.dataset)
    if spec.train_samples:
        want = spec.train_samples if split is None else min(spec.train_samples, split)
    elif split is None or synthetic and donor_synthetic:
        return donor.samples * donor.periods   # the same generated set's size, or a dataset whose split is not known
    else:
        want = split   # the whole real split (a donor of another profile may have trained on a slice of it)
    batch = int(spec.hparams.get("batch", 1)) * max(cell.devices, 1)
    return max(want // batch * batch, batch) if want >= batch else want


def seconds(cell: Cell, donor: Donor, factor: float = 1.0, *, synthetic: bool = False,
            donor_synthetic: bool = False, profiled: bool = False, on_device: bool = False, whole_step: bool = False,
            framework_ratio: float = 1.0, least: bool = False, pass_default: float = 0.0) -> float:
    """The planned cell's estimated seconds from its donor (module docstring); `profiled`: this repeat runs the profiled
    pass (a single-device fp32 model cell's first repeat), `on_device`: on an accelerator (its pass is a window of a
    few steps, harness.profiling.DEVICE_STEPS); `whole_step`: the factor was measured for the whole step;
    `framework_ratio`: the training steps' factor for another framework than the donor's
    (harness.estimate.frameworkratio); `least`: a cell that stops at its target, where no measured cell says when it
    reaches it, at its first evaluation (the range's low end) rather than at its planned epochs; `pass_default`: the
    profiled pass's seconds where the donor ran none (a profile without it: the median pass of the pool's cells of the
    framework, mostly the profiler's own start)."""
    spec = cell.spec
    if donor.samples == 0 or not isinstance(spec, ModelSpec):
        return donor.elapsed_s   # a cell timed by blocks of at least a fixed time: its time barely scales
    own = cell.id == donor.cell and donor.ok and factor == 1.0 and framework_ratio == 1.0 and \
        synthetic == donor_synthetic and spec.epochs and (
        donor.epochs_run == spec.epochs * donor.periods or donor.reached_target and spec.stop_at_target)
    if own and profiled and not on_device:
        return donor.elapsed_s
    samples = planned_samples(cell, donor, synthetic, donor_synthetic)
    ran = donor.epochs_run / donor.periods   # the donor's whole epochs (each recorded period an evaluation)
    planned = int(spec.epochs or ran or 1)
    same = (cell.model == donor.model and synthetic == donor_synthetic and spec.stop_at_target)
    epochs: float = min(ran, planned) if same and donor.reached_target else planned
    if least and spec.stop_at_target and not (same and donor.reached_target):
        # the least it can take: nothing measured says when it reaches its target, and it may at its first evaluation
        epochs = 1 / max(1, int(spec.evals_per_epoch or 1))
    per_dev = donor.devices / max(cell.devices, 1)   # data parallelism splits an epoch's samples over the devices
    # A step takes the longer of the host's part (as measured) and the device's part scaled to this device: a
    # host-bound step on a fast device does not slow down in proportion on a slower one.
    step = factor if whole_step or factor <= 1 else max(1.0, donor.busy * factor)
    train = epochs * samples * donor.per_sample_s * per_dev * step * framework_ratio
    # A donor that autotuned where this cell will not (harness.frameworks.pytorch.autotune_pays): its first epoch's
    # extra time is taken as the autotuning (on the H200 not separated from lazy initialisation).
    first = 0.0 if donor.autotuned and not _autotunes(cell) else donor.first_s
    # a graph compiled per batch shape: the first epoch's extra time in proportion to the shapes
    first *= shapes(spec.hparams) / max(donor.shapes, 1)
    # an evaluation's time in proportion to the samples it reads, where both cells set them; as many as it evaluates
    mine = evals(spec)
    per_eval = donor.eval_s * (mine / donor.eval_n if mine and donor.eval_n else 1.0)
    n_evals = epochs * max(1, int(spec.evals_per_epoch or 1))
    return (donor.fixed_s - donor.pass_s + factor * first + train + factor * n_evals * per_eval
            + ((pass_seconds(cell, donor, on_device) or pass_default) if profiled else 0.0))


def _autotunes(cell: Cell) -> bool:
    from harness.frameworks.pytorch import autotune_pays

    return cell.framework != "pytorch" or autotune_pays(cell.spec, cell.spec.hparams)


PROFILER_START_S = 2.0   # a profiler's start, stop and parsing around a window of a few steps: an assumption


def pass_seconds(cell: Cell, donor: Donor, on_device: bool) -> float:
    """The profiled pass's seconds: the donor's own on a CPU; on a device a window of a few steps (the FLOP-counted
    step, the warm-up and harness.profiling.DEVICE_STEPS) at the donor's profiled step time, plus the profiler's
    start (PROFILER_START_S), where the donor's pass recorded whole epochs."""
    if not on_device or donor.profiled_step_s is None:
        return donor.pass_s
    batch = int(cell.spec.hparams.get("batch") or 0) if isinstance(cell.spec, ModelSpec) else 0
    per_epoch = max(1, donor.samples // batch) if batch else 1
    need = 2 + profiling.DEVICE_WARMUP + profiling.DEVICE_STEPS
    window = -(-need // per_epoch) * per_epoch * donor.profiled_step_s + PROFILER_START_S
    return min(donor.pass_s, window) if donor.pass_s else window


@dataclass
class Estimate:
    per_cell: dict[str, float]           # cell id -> seconds for a repeat after the first (no profiled pass)
    how: dict[str, str]                  # cell id -> measured | like | model | kind | none
    runs: int
    total_s: float
    skipped: int
    first: dict[str, float]              # cell id -> seconds of its first repeat (its profiled pass with it)
    donor: dict[str, Donor] = field(default_factory=dict)                  # cell id -> the cell it was priced from
    scale: dict[str, devicescale.Scale] = field(default_factory=dict)      # cell id -> its device factor
    ratio: dict[str, float] = field(default_factory=dict)                  # cell id -> its framework ratio, where not 1


def plan(todo: Sequence[tuple[Cell, int]], pool: dict[str, Donor], *, here: str | None = None,
         synthetic: Iterable[str] = (), ref_synthetic: Iterable[str] = (), skip=lambda c: None,
         on_device: bool = False, ratio: Callable[[Cell, Donor], float] = lambda c, d: 1.0,
         least: bool = False) -> Estimate:
    """The estimated seconds of every planned (cell, repeat); `skip(cell)` gives the reason a cell will not run here
    (then 0 s), `here` this host's device name (None: the reference's), `on_device`: the planned host is an
    accelerator, `ratio(cell, donor)`: the training steps' factor of a cell priced from another framework's donor.
    `per_cell`: a cell's seconds for a repeat after its first (the first adds its profiled pass)."""
    fake, ref_fake = set(synthetic), set(ref_synthetic)
    passes_by_fw = {fw: median(d.pass_s for d in pool.values() if d.framework == fw and d.pass_s)
                    for fw in {d.framework for d in pool.values() if d.pass_s}}

    def generated(dataset: str | None, names: set[str]) -> bool:
        return ALL in names or dataset in names

    per_cell: dict[str, float] = {}
    how: dict[str, str] = {}
    total, skipped = 0.0, 0
    first: dict[str, float] = {}   # a cell's first repeat, with its profiled pass
    out = Estimate(per_cell, how, len(todo), 0.0, 0, first)
    for cell, repeat in todo:
        if cell.id not in per_cell:
            if skip(cell):
                per_cell[cell.id], how[cell.id], first[cell.id] = 0.0, "skipped", 0.0
            else:
                donor, how[cell.id] = pick(cell, pool)
                if donor is None:
                    per_cell[cell.id] = first[cell.id] = 0.0
                else:
                    dtype = (cell.spec.dtype if cell.kind == "operator" else catalog.precision(cell.amp))
                    s = devicescale.scale(donor.device, here, cell.model, dtype)
                    r = ratio(cell, donor) if cell.framework != donor.framework else 1.0
                    out.donor[cell.id], out.scale[cell.id] = donor, s
                    if r != 1.0:
                        out.ratio[cell.id] = r
                    f = s.factor
                    kw = {"synthetic": generated(cell.dataset, fake), "whole_step": s.whole_step,
                          "donor_synthetic": generated(cell.dataset, ref_fake), "on_device": on_device,
                          "framework_ratio": r, "least": least,
                          "pass_default": passes_by_fw.get(cell.framework, 0.0)}
                    per_cell[cell.id] = seconds(cell, donor, f, **kw)
                    passes = isinstance(cell.spec, ModelSpec) and profiling.runs_pass(cell, 0)
                    first[cell.id] = seconds(cell, donor, f, profiled=passes, **kw)
        if how[cell.id] == "skipped":
            skipped += 1
        total += first[cell.id] if repeat == 0 else per_cell[cell.id]
    out.total_s, out.skipped = total, skipped
    return out

