"""Why a verdict: a cell's training step taken apart by its framework's own profiler, in one vocabulary of operator
categories for both frameworks (declared once here, each framework's op names mapped to it in categories.toml).

    categorise(framework, op)         -> a category of CATEGORIES ("other" where no rule matches)
    summarise(framework, ops, steps, step_wall_s, profiled_step_s)
                                      -> time per step and share per category, the top ops, and the host and
                                         framework overhead (step wall time minus the sum of op self times)
"""

from __future__ import annotations

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
    """The category of an op that calls others (its whole time goes there), or None where `name` is not one."""
    return next((c for pattern, c in _rules().get((framework, "scopes"), []) if pattern.fullmatch(name)), None)


def categorise(framework: str, op: str, strict: bool = False) -> str | None:
    """The category of one of a framework's op names: its scope's where it is one, else the first `ops` rule that
    matches it whole; where none does, "other" (None with `strict`: the coverage check's "no category")."""
    found = scope(framework, op) or next(
        (c for pattern, c in _rules().get((framework, "ops"), []) if pattern.fullmatch(op)), None)
    return found or (None if strict else "other")


def summarise(framework: str, ops: dict[str, tuple[float, int]], steps: int, step_wall_s: float,
              profiled_step_s: float | None = None) -> dict[str, Any]:
    """`ops`: op name -> (self time over the profiled steps in seconds, calls). `step_wall_s`: the measured step's wall
    time; `profiled_step_s`: the profiled step's (the same where not given).

    The profiler slows a step, and not evenly (more per op call than per flop), so its self times are read as shares
    of the profiled step: each category's share is its ops' self time over the profiled step's wall time, the host
    and framework overhead is the share the ops do not account for, and a category's time per step is its share of the
    measured step. The categories and the overhead then add up to the step that C1 and C4 compare. Where the self
    times add up past the profiled wall time (ops timed on several threads at once), the shares are of their sum and
    the overhead is nil. `self_s`: the profiler's own self times per step, unscaled."""
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
            "ops": {op: [s / steps, categorise(framework, op)] for op, (s, _) in ops.items()}}


def enabled() -> bool:
    return os.environ.get("HARNESS_PROFILE", "on").lower() not in ("off", "0", "no")


AFTER = "_profiled_pass"   # the scenario's deferred profiled pass, which the child runs after telemetry stops
RAW_LIMIT_BYTES = 2_000_000   # the profiler's own files kept per cell; beyond it the largest go


# The profiled pass trains epochs until their wall time reaches PROFILED_MIN_S, or PROFILED_MAX_EPOCHS: GCN's epoch is
# one step, and MindSpore's CPU dropout on its input takes about 10.5 ms when both of a 2-core host's threads run it and
# about 20 ms when one does; ten calls of such an op give a mean that moves by a tenth from one run to the next.
PROFILED_MIN_S = 1.0
PROFILED_MAX_EPOCHS = 50


def profiled_epoch(ctx, backend, workload, measured_epoch_s: float | None) -> dict[str, Any]:
    """More training epochs under the framework's profiler, after the measured ones: they count toward no throughput
    and no time to target. One epoch, or as many as reach PROFILED_MIN_S of wall time (at most PROFILED_MAX_EPOCHS), so
    that a short step's ops are read over several steps. The wall time is read inside the profiled block (the
    profiler's start, stop and parsing are outside it); `profiler_cost` is the profiled epochs' mean over the mean
    measured epoch, less 1."""
    walls: list[float] = []

    def run() -> None:
        while not walls or (sum(walls) < PROFILED_MIN_S and len(walls) < PROFILED_MAX_EPOCHS):
            t = time.perf_counter()
            workload.train_epoch()
            backend.synchronize(ctx)
            walls.append(time.perf_counter() - t)

    ops = backend.profile_ops(ctx, run, ctx.profile_dir)
    batch = ctx.hparams.get("batch")
    per_epoch = max(1, math.ceil(workload.samples_per_epoch / batch)) if batch else 1   # full-batch models: one step
    steps = per_epoch * len(walls)
    epoch_s = sum(walls) / len(walls)
    # Shares from the profiled epochs, times from the measured ones (summarise says why).
    out = summarise(ctx.cell.framework, ops, steps, (measured_epoch_s or epoch_s) / per_epoch, epoch_s / per_epoch)
    out["profiled_epochs"] = len(walls)
    out["profiler_cost"] = epoch_s / measured_epoch_s - 1 if measured_epoch_s else None
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
