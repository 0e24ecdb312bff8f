"""Why a verdict: a cell's training step taken apart by its framework's own profiler, in one vocabulary of operator
categories for both frameworks (declared once here, each framework's op names mapped to it in categories.toml).

    categorise(framework, op)         -> a category of CATEGORIES ("other" where no rule matches)
    summarise(framework, ops, steps, step_wall_s, profiled_step_s)
                                      -> time per step and share per category, the top ops, and the host and
                                         framework overhead (step wall time minus the sum of op self times)
    kernel_category(name)             -> a device kernel's category (cuDNN, cuBLAS, PyTorch's and Triton's kernels,
                                         CANN's op types), for the device timeline (harness.profiling.device)
    host_call(name)                   -> whether a profiler event is the runtime's or the profiler's own, not an op
"""

from __future__ import annotations

import importlib
import math
import os
import re
import shutil
import time
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

CATEGORIES = ("convolution", "matmul/dense", "normalisation", "activation", "dropout/random", "recurrent",
              "embedding/gather", "loss", "optimizer update", "elementwise", "copy/cast/layout", "other")
OVERHEAD = "host and framework overhead"   # step wall time minus the ops' self times: its own category
TOP_OPS = 10
OTHER_LIMIT = 0.05   # "other" (ops named but of no category of their own) may hold at most this share of a step


@cache
def _rules() -> dict[tuple[str, str], list[tuple[re.Pattern, str]]]:
    """(framework, "scopes" | "ops") -> [(pattern, category)], in the file's order."""
    table = tomllib.loads((Path(__file__).with_name("categories.toml")).read_text())
    out: dict[tuple[str, str], list[tuple[re.Pattern, str]]] = {}
    for framework, sections in table.items():
        for section, cats in sections.items():
            for category, patterns in cats.items():
                if category not in CATEGORIES:
                    raise ValueError(f"categories.toml: [{framework}.{section}] names '{category}', not one of "
                                     f"{CATEGORIES}")
                out.setdefault((framework, section), []).extend((re.compile(p), category) for p in patterns)
    return out


def scope(framework: str, name: str) -> str | None:
    """The category of an op that calls others (its whole time goes there), or None where `name` is not one. The
    accelerator's own op names (cuDNN's, torch_npu's, CANN's) count as scopes: a cuDNN batch norm's backward holds
    the kernels it launches."""
    rules = _rules()
    return next((c for section in ("scopes", "accelerator") for pattern, c in rules.get((framework, section), [])
                 if pattern.fullmatch(name)), None)


def host_call(name: str) -> bool:
    """An event of the CUDA or Ascend runtime's API (cudaLaunchKernel, aclrtMemcpy) or of the profiler itself: host
    work whose time is the overhead's, not an op."""
    return any(pattern.fullmatch(name) for pattern, _ in _rules().get(("host", "calls"), []))


def kernel_category(name: str) -> str:
    """A device kernel's (or copy's) category, from its name ("other" where no rule matches)."""
    return next((c for pattern, c in _rules().get(("device", "kernels"), []) if pattern.fullmatch(name)), "other")


def categorise(framework: str, op: str, strict: bool = False) -> str | None:
    """The category of one of a framework's op names: its scope's where it is one, else the first `ops` rule that
    matches it whole; where none does, "other" (None with `strict`: the coverage check's "no category")."""
    found = scope(framework, op) or next(
        (c for pattern, c in _rules().get((framework, "ops"), []) if pattern.fullmatch(op)), None)
    return found or (None if strict else "other")


def summarise(framework: str, ops: dict[str, tuple[float, int]], steps: int, step_wall_s: float,
              profiled_step_s: float | None = None, device: dict[str, Any] | None = None) -> dict[str, Any]:
    """`ops`: op name -> (self time over the profiled steps in seconds, calls). `step_wall_s`: the measured step's wall
    time; `profiled_step_s`: the profiled step's (the same where not given).

    The profiler slows a step, and not evenly (more per op call than per flop), so its self times are read as shares
    of the profiled step: each category's share is its ops' self time over the profiled step's wall time, the host
    and framework overhead is the share the ops do not account for, and a category's time per step is its share of the
    measured step. The categories and the overhead then add up to the step that C1 and C4 compare. Where the self
    times add up past the profiled wall time (ops timed on several threads at once), the shares are of their sum and
    the overhead is nil. `self_s`: the profiler's own self times per step, unscaled. `device`: the device timeline's
    block (harness.profiling.device.timeline; None on a CPU), with its busy and waiting time scaled to the measured
    step as the categories are."""
    ops = {op: v for op, v in ops.items() if not host_call(op)}
    self_s = dict.fromkeys(CATEGORIES, 0.0)
    for op, (seconds, _) in ops.items():
        self_s[categorise(framework, op)] += seconds / steps
    busy = sum(self_s.values())
    profiled = profiled_step_s or step_wall_s
    whole = max(profiled, busy)
    share = {**{c: (v / whole if whole > 0 else 0.0) for c, v in self_s.items()},
             OVERHEAD: (1 - busy / whole if whole > 0 else 0.0)}
    top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:TOP_OPS]
    return {"steps": steps, "step_wall_s": step_wall_s, "profiled_step_s": profiled,
            "per_step_s": {c: v * step_wall_s for c, v in share.items()},
            "share": share,
            "self_s": self_s,
            "top_ops": [{"op": op, "category": categorise(framework, op), "self_s_per_step": s / steps,
                         "calls_per_step": n / steps} for op, (s, n) in top],
            # every op, for the category coverage check (tools/profile_ops.py): name -> [s per step, category]
            "ops": {op: [s / steps, categorise(framework, op)] for op, (s, _) in ops.items()},
            "device": _device_times(device, step_wall_s)}


def _device_times(device: dict[str, Any] | None, step_wall_s: float) -> dict[str, Any] | None:
    """The device block with the measured step's busy and waiting time. The device's busy time is its kernels' own
    duration, which the profiler's host-side cost does not stretch (the profiled step grows, the kernels do not), so
    it is taken as it is against the measured step (at most the whole step); the rest of the step the device
    waited."""
    if not device:
        return None
    busy = min(device["busy_s"], step_wall_s)
    return {**device, "measured_busy_s": busy, "measured_wait_s": step_wall_s - busy,
            "measured_busy_share": busy / step_wall_s if step_wall_s > 0 else None}


def enabled() -> bool:
    return os.environ.get("HARNESS_PROFILE", "on").lower() not in ("off", "0", "no")


def runs_pass(cell, repeat: int, world_size: int = 1) -> bool:
    """Whether this (cell, repeat) is one the profiled pass follows (when enabled()): a single-process model cell's
    first repeat, at fp32 (the precision C1 and C4 compare), in a mode whose ops its framework's profiler names (the
    back-end's PROFILED_MODES: not torch.compile's generated kernels). The child asks it, and the estimate of a run
    (harness.estimate.stepmodel) counts the pass where it is; the estimate leaves HARNESS_PROFILE alone, so that the
    docs it renders read nothing of the host. The back-end is a plug-in, loaded by its name as
    harness.frameworks.backend loads it: the back-ends read this module's categories."""
    back_end = importlib.import_module(f"harness.frameworks.{cell.framework}")
    return (cell.kind == "model" and world_size == 1 and repeat == 0 and cell.amp == "off"
            and cell.mode in back_end.PROFILED_MODES)


AFTER = "_profiled_pass"   # the scenario's deferred profiled pass, which the child runs after telemetry stops
RAW_LIMIT_BYTES = 2_000_000   # the profiler's own files kept per cell; beyond it the largest go


# On a CPU the profiled pass trains epochs until their wall time reaches PROFILED_MIN_S, or PROFILED_MAX_EPOCHS: GCN's
# epoch is one step, and MindSpore's CPU dropout on its input takes about 10.5 ms when both of a 2-core host's threads
# run it and about 20 ms when one does; ten calls of such an op give a mean that moves by a tenth from one run to the
# next.
PROFILED_MIN_S = 1.0
PROFILED_MAX_EPOCHS = 50
# On an accelerator a profiler that records every step of an epoch costs far more than the steps: under CUPTI the
# H200's profiled epochs ran 61-80% slower, and reading back tens of thousands of kernel records took seconds a cell.
# There the pass records a window of DEVICE_STEPS steps after DEVICE_WARMUP unrecorded ones (a step whose FLOPs are
# counted comes first, unrecorded too); the rest of the epoch runs with the profiler idle.
DEVICE_WARMUP = 1
DEVICE_STEPS = 15


def profiled_epoch(ctx, backend, workload, measured_epoch_s: float | None) -> dict[str, Any]:
    """More training under the framework's profiler, after the measured epochs: it counts toward no throughput and no
    time to target. On a CPU, one epoch or as many as reach PROFILED_MIN_S of wall time (at most PROFILED_MAX_EPOCHS),
    so that a short step's ops are read over several steps; their wall time is read inside the profiled block. A
    PyTorch cell's first step there runs under the FLOP counter instead of the profiler (the back-end's profile_ops),
    and its time is left out of the profiled steps'. On an accelerator, epochs until a window of DEVICE_STEPS steps is
    recorded (the backend marks the steps and times the window between two synchronisations, harness.profiling.device),
    with the device's busy time beside the ops. `profiler_cost`: the profiled step's wall time over the measured step's,
    less 1; `pass_s`: the seconds the whole pass took (the profiler's start, the steps, its stop and the parsing).
    `flops_per_sample` (PyTorch): the model's FLOPs per training sample, one step's forward and backward under
    torch.utils.flop_counter over its samples."""
    from harness.profiling import device as dev

    walls: list[float] = []
    batch = ctx.hparams.get("batch")
    per_epoch = max(1, math.ceil(workload.samples_per_epoch / batch)) if batch else 1   # full-batch models: one step
    on_device = ctx.platform != "cpu"
    window: dict[str, Any] | None = None
    if on_device:
        window = {"warmup": DEVICE_WARMUP, "active": DEVICE_STEPS, "count_flops": True,
                  "samples_per_step": batch or workload.samples_per_epoch}
    elif ctx.cell.framework == "pytorch":
        # The model's FLOPs per sample on a CPU too: the pass's first step runs under the FLOP counter, unrecorded
        # (the back-end starts its profiler after it). A MindSpore cell takes its PyTorch twin's count (the report).
        window = {"count_flops": True, "samples_per_step": batch or workload.samples_per_epoch}
    need = (2 + DEVICE_WARMUP + DEVICE_STEPS) if on_device else 0   # the FLOP-counting step, the warm-up, the window
    counted = int(window is not None and not on_device)   # the CPU's counted step, which no profile holds

    def run() -> None:
        while not walls or len(walls) < PROFILED_MAX_EPOCHS and (
                per_epoch * len(walls) < need if on_device
                else sum(walls) < PROFILED_MIN_S or per_epoch * len(walls) <= counted):
            t = time.perf_counter()
            workload.train_epoch()
            backend.synchronize(ctx)
            walls.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    ops = backend.profile_ops(ctx, run, ctx.profile_dir, **({"window": window} if window is not None else {}))
    epoch_s = sum(walls) / len(walls)
    steps, profiled_step = per_epoch * len(walls), epoch_s / per_epoch
    timeline = None
    if counted and window.get("counted_s") is not None:   # the counted step is not a profiled one
        steps -= 1
        profiled_step = (sum(walls) - window["counted_s"]) / steps
    if on_device and window is not None:
        if window.get("steps"):   # the backend recorded a window of steps (PyTorch)
            steps, profiled_step = window["steps"], window["window_s"] / window["steps"]
        timeline = dev.timeline(window.get("kernels") or [], steps, window.get("window_s") or sum(walls),
                                window.get("source", ctx.cell.framework), window.get("verified", True),
                                category=kernel_category)
    measured_step = (measured_epoch_s / per_epoch) if measured_epoch_s else profiled_step
    # Shares from the profiled steps, times from the measured ones (summarise says why).
    out = summarise(ctx.cell.framework, ops, steps, measured_step, profiled_step, timeline)
    out["profiled_epochs"] = len(walls)
    out["profiler_cost"] = profiled_step / measured_step - 1 if measured_epoch_s else None
    out["pass_s"] = time.perf_counter() - t0
    if window is not None and window.get("flops_per_step"):
        out["flops_per_sample"] = window["flops_per_step"] / window["samples_per_step"]
    if counted and window.get("counted_s") is not None:
        out["counted_step_s"] = window["counted_s"]   # the FLOP-counted step's wall time, the profiler's start with it
    out["raw"] = _bound(ctx.profile_dir)
    return out


def _bound(folder: str) -> list[str]:
    """Keep the profiler's own output under RAW_LIMIT_BYTES (the op tables first: the largest files go)."""
    files = sorted((os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs), key=os.path.getsize)
    kept, total = [], 0
    for f in files:
        size = os.path.getsize(f)
        if total + size > RAW_LIMIT_BYTES:
            os.remove(f)
            continue
        total += size
        kept.append(os.path.relpath(f, folder))
    for d, _, _ in sorted(os.walk(folder), key=lambda w: -len(w[0])):
        if d != folder and not os.listdir(d):
            shutil.rmtree(d, ignore_errors=True)
    return kept


def run_after(out: dict[str, Any]) -> None:
    """The child's last step: the scenario's deferred profiled pass, if any, into out["profile"]. A profiler that
    fails is recorded there; it never fails a cell that was measured."""
    after = out.pop(AFTER, None)
    if after is None or out.get("status") != "ok":
        return
    try:
        out["profile"] = after()
    except Exception as e:  # noqa: BLE001 - the cell's measurements stand without the explanation
        out["profile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
