"""Predict each model's peak device memory at the accelerator profile's sizes, on the CPU, and write the committed
predictions (harness/devices/devicememory.json) that `harness run`, `list` and `estimate` read
(harness/devices/memory.py).

    python tools/predict_memory.py [--data-dir DIR] [--only MODEL[,MODEL]] [--steps 2] [--out FILE]

Per model, at fp32 and under autocast: the model's PyTorch eager cell of the profile, on one device, is built as a
cell builds it (harness.launch.inprocess.set_up: its folder's build(ctx, data), with the real dataset where --data-dir
holds it, else its synthetic stand-in, recorded). Its parameters, buffers and the tensors the workload keeps (GCN's
graph) then become fake tensors (FakeTensorMode: shape, dtype and device, no storage), and its own train_epoch() runs
under PyTorch's MemTracker (torch.distributed._tools.mem_tracker), which adds up the bytes of every live tensor after
each operator: the full batch costs no memory here. The trace stops after --steps optimizer steps (the optimizer's state
exists from the first), or at the end of the epoch if the batches' shapes differed. Autocast on the CPU is bf16,
which stands in for a device's fp16: the same two bytes an element. A model that accumulates gradients
(contracts.AccumulatingModel) is traced twice more per precision with its batch in two micro-batches, at
micro-batches of a half and a quarter of its batch ("accumulated": what harness.devices.memory plans micro-batches by).
 Slow (BERT-base: about a minute per precision on 2 cores, most of it MemTracker's bookkeeping), hence committed;
tests/test_devicememory.py fails when a model's sizes or code changed since (harness.devices.memory.stale) and
re-derives the cheap models' figures.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import data as datasets  # noqa: E402
from harness.config import matrix as matrix_mod  # noqa: E402
from harness.config.cell import Cell  # noqa: E402
from harness.devices import accumulation  # noqa: E402
from harness.devices import memory as devicememory  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.launch import inprocess  # noqa: E402

PROFILE = "accelerator"
AMP = {"fp32": "off", "amp": "O2"}   # the PyTorch cell each precision is traced on
PARTS = {"Parameter": "parameters", "Buffer": "buffers", "Gradient": "gradients", "Optstate": "optimizer",
         "Activation": "activations", "Temp": "temporaries", "Other": "kept_tensors"}
DEFAULT_DATA = os.environ.get("HARNESS_DATA_DIR", str(Path.home() / ".cache" / "ms-pt-harness" / "data"))


class _Enough(Exception):
    """Raised from the optimizer's step hook once the steps asked for are traced."""


def cell_of(m: matrix_mod.Matrix, model: str, prec: str) -> Cell:
    want = f"model/{model}/pytorch/eager/amp-{AMP[prec]}/1dev"
    found = [c for c in m.expand(PROFILE) if c.id == want]
    if not found:
        raise HarnessError(f"the {PROFILE} profile has no cell {want}: nothing to trace for {model} at {prec}")
    return found[0]


def data_folder(cell: Cell, data_dir: Path | None) -> str | None:
    """The verified real dataset where data_dir holds it, else None (the synthetic stand-in)."""
    if data_dir is None:
        return None
    try:
        return str(datasets.prepare(cell.dataset, data_dir, False))
    except HarnessError:
        return None


def _optimizers(workload) -> list:
    import torch

    opts = [v for v in vars(workload).values() if isinstance(v, torch.optim.Optimizer)]
    if not opts:
        raise HarnessError(f"{type(workload).__module__}: its workload keeps no torch.optim optimizer as an attribute; "
                           f"the trace needs one")
    return opts


def _fake(fm, workload, opts: list) -> None:
    """The workload's parameters, buffers and kept tensors as fake tensors, in place (the optimizers' parameter
    lists too). Real ones would be counted twice: MemTracker would see each one and also the fake copy the mode
    makes of it at its first use."""
    import torch

    new: dict[int, Any] = {}
    for mod in workload.net.modules():
        for name, p in list(mod._parameters.items()):
            if p is not None:
                if id(p) not in new:   # a tied weight stays one parameter
                    new[id(p)] = torch.nn.Parameter(fm.from_tensor(p.detach(), static_shapes=True),
                                                    requires_grad=p.requires_grad)
                mod._parameters[name] = new[id(p)]
        for name, b in list(mod._buffers.items()):
            if b is not None:
                mod._buffers[name] = fm.from_tensor(b, static_shapes=True)
    for opt in opts:
        for group in opt.param_groups:
            group["params"] = [new[id(p)] for p in group["params"]]
    for key, value in list(vars(workload).items()):
        # A sparse tensor stays real: its fake copy's indices and values show MemTracker no bytes.
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and not value.is_sparse:
            setattr(workload, key, fm.from_tensor(value, static_shapes=True))


def trace(cell: Cell, folder: str | None, steps: int = 2, fake: bool = True,
          accumulation_steps: int = 1) -> dict[str, Any]:
    """The cell's peak (bytes, by MemTracker's kinds) over its first `steps` training steps, each in
    `accumulation_steps` micro-batches, and what it rests on. `fake=False` traces real tensors instead (the check
    that both give the same peak, at a size that fits)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools import mem_tracker
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    original = mem_tracker.get_untyped_storages

    def _storages(t):
        # MemTracker reads every tensor's storage, and a sparse tensor (GCN's adjacency) has none of its own: its
        # indices and values hold its memory.
        if isinstance(t, torch.Tensor) and t.is_sparse:
            return original(t._indices()) | original(t._values())
        return original(t)

    workload = inprocess.set_up(cell, folder, accumulation_steps=accumulation_steps).workload
    params = sum(p.numel() for p in workload.net.parameters())
    # A shape environment lets `.item()` (each epoch's mean loss) return a symbol instead of failing.
    fm = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()) if fake else contextlib.nullcontext()
    shapes: set[tuple] = set()
    done = [0]
    opts = _optimizers(workload)
    if fake:
        with fm:
            _fake(fm, workload, opts)
    tracker = mem_tracker.MemTracker()
    kept = [v for v in vars(workload).values() if isinstance(v, torch.Tensor)]   # GCN's graph, on the device
    with mock.patch.object(mem_tracker, "get_untyped_storages", _storages):
        # Outside the fake mode: there a real sparse tensor's indices and values would come back as fakes.
        tracker.track_external(workload.net, *opts, *kept)
    with fm, mock.patch.object(mem_tracker, "get_untyped_storages", _storages):
        def seen(module, args):
            shapes.add(tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor)))

        def stepped(opt, args, kwargs):
            tracker.reset_mod_stats()   # each step is an iteration of its own to MemTracker
            done[0] += 1
            if done[0] >= steps and len(shapes) == 1:
                raise _Enough

        def again(module, args):
            # MemTracker refuses a module's second forward pass in one iteration; a step over micro-batches makes one
            # per micro-batch. Its per-module statistics are cleared then (the peak over the run is kept), as they
            # are at each step (`stepped`). Global, so that it runs before MemTracker's own global hook.
            if module is workload.net and module in tracker.memory_tracking:
                tracker.reset_mod_stats()

        workload.net.register_forward_pre_hook(seen)
        for opt in opts:
            opt.register_step_post_hook(stepped)
        hook = torch.nn.modules.module.register_module_forward_pre_hook(again)
        try:
            with tracker:
                while done[0] < steps:
                    workload.train_epoch()
        except _Enough:
            pass
        finally:
            hook.remove()
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    parts = {PARTS[k.value]: int(v) for k, v in peak.items() if k != "Total"}
    return {"peak_bytes": int(peak["Total"]), "parts_bytes": parts, "steps": done[0], "batch_shapes": len(shapes),
            "parameters": params, "data": "real" if folder else "synthetic"}


def predict(m: matrix_mod.Matrix, model: str, data_dir: Path | None, steps: int, log=print) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prec in AMP:
        cell = cell_of(m, model, prec)
        got = trace(cell, data_folder(cell, data_dir), steps)
        hp = cell.spec.hparams
        out.update(fingerprint=devicememory.fingerprint(cell.spec, model), batch=hp.get("batch"),
                   sequence=hp.get("max_len"), dataset=cell.dataset, data=got["data"], parameters=got["parameters"])
        out[prec] = {"peak_gib": round(got["peak_bytes"] / 2**30, 3),
                     "parameters_gib": round(got["parts_bytes"]["parameters"] / 2**30, 3),
                     "peak_bytes": got["peak_bytes"], "parts_bytes": got["parts_bytes"], "steps": got["steps"]}
        log(f"{model} {prec}: {got['peak_bytes'] / 2**30:.2f} GiB at its peak ({got['steps']} steps traced, "
            f"{got['data']} data, {got['parameters']:,} parameters)")
        if accumulation.refusal(model) is None:
            out[prec]["accumulated"] = accumulated(cell, data_folder(cell, data_dir), steps, log)
    return out


def accumulated(cell: Cell, folder: str | None, steps: int, log=print) -> dict[str, Any]:
    """The peaks of a model that accumulates gradients with its batch in two micro-batches, at micro-batches of a
    half and a quarter of its batch (the second traced at half the batch, which changes no size but the batch's):
    the gradients' sums are alive through the second micro-batch's forward pass, and the line through the two
    peaks gives any micro-batch's (harness.devices.memory.micro_need)."""
    batch = int(cell.spec.hparams["batch"])
    got = []
    for b in (batch, batch // 2):
        half = replace(cell, spec=replace(cell.spec, hparams={**cell.spec.hparams, "batch": b}))
        got.append(trace(half, folder, steps, accumulation_steps=2))
        log(f"{cell.model} {devicememory.precision(cell.amp)}, 2 micro-batches of {b // 2}: "
            f"{got[-1]['peak_bytes'] / 2**30:.2f} GiB at its peak")
    return {"micro_batches": [batch // 2, batch // 4], "peak_bytes": [g["peak_bytes"] for g in got],
            "parts_bytes": [g["parts_bytes"] for g in got], "steps": steps}


def main(argv: list[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA),
                   help="folder of per-dataset folders; a dataset it lacks is generated (synthetic, same shapes)")
    p.add_argument("--only", help="comma-separated models to predict again (the others are kept from --out)")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps traced per precision (default 2)")
    p.add_argument("--out", type=Path, default=devicememory.PREDICTIONS)
    args = p.parse_args(argv)
    try:
        m = matrix_mod.load()
        models = list(m.profile(PROFILE)["models"])
        only = [s for s in (args.only or "").split(",") if s]
        unknown = sorted(set(only) - set(models))
        if unknown:
            raise HarnessError(f"--only {','.join(unknown)}: not a model of the {PROFILE} profile; choose from "
                               f"{', '.join(models)}")
        if args.steps < 2:
            raise HarnessError(f"--steps {args.steps}: trace at least 2 (the optimizer's state exists from the first)")
        old = json.loads(args.out.read_text()).get("models", {}) if args.out.is_file() and only else {}
        done = {name: (predict(m, name, args.data_dir, args.steps) if not only or name in only else old[name])
                for name in models if not only or name in only or name in old}
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    doc = {"schema": devicememory.SCHEMA, "profile": PROFILE, "made_with": "python tools/predict_memory.py",
           "date": dt.date.today().isoformat(), "torch": torch.__version__,
           "method": "FakeTensorMode + torch.distributed._tools.mem_tracker.MemTracker on the CPU: the model's PyTorch "
                     "eager cell at the profile's sizes, its first training steps; autocast in bf16 for AMP",
           "models": done}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
