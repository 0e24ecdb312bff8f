"""Why a verdict: a cell's training step taken apart by its framework's own profiler, in one vocabulary of operator
categories for both frameworks (declared once here, each framework's op names mapped to it in categories.toml).

    categorise(framework, op)         -> a category of CATEGORIES ("other" where no rule matches)
    summarise(framework, ops, steps, step_wall_s)
                                      -> time per step and share per category, the top ops, and the host and
                                         framework overhead (step wall time minus the sum of op self times)
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

CATEGORIES = ("convolution", "matmul/dense", "normalisation", "activation", "dropout/random", "recurrent",
              "embedding/gather", "loss", "optimizer update", "elementwise", "copy/cast/layout", "other")
OVERHEAD = "host and framework overhead"   # step wall time minus the ops' self times: its own category
TOP_OPS = 10


@cache
def _rules() -> dict[str, list[tuple[re.Pattern, str]]]:
    table = tomllib.loads((Path(__file__).with_name("categories.toml")).read_text())
    out: dict[str, list[tuple[re.Pattern, str]]] = {}
    for framework, cats in table.items():
        for category, patterns in cats.items():
            if category not in CATEGORIES:
                raise ValueError(f"categories.toml: [{framework}] names '{category}', not a category of {CATEGORIES}")
            out.setdefault(framework, []).extend((re.compile(p), category) for p in patterns)
    return out


def categorise(framework: str, op: str) -> str:
    """The category of one of a framework's op names: the first rule (in categories.toml's order) that matches it
    whole; "other" where none does."""
    for pattern, category in _rules().get(framework, []):
        if pattern.fullmatch(op):
            return category
    return "other"


def summarise(framework: str, ops: dict[str, tuple[float, int]], steps: int, step_wall_s: float) -> dict[str, Any]:
    """`ops`: op name -> (self time over the profiled steps in seconds, calls). Per step: each category's time and its
    share of the step's wall time, the overhead (wall time the ops' self times do not account for), and the top ops."""
    per_cat = dict.fromkeys(CATEGORIES, 0.0)
    for op, (seconds, _) in ops.items():
        per_cat[categorise(framework, op)] += seconds / steps
    busy = sum(per_cat.values())
    per_step = {**per_cat, OVERHEAD: max(0.0, step_wall_s - busy)}
    top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:TOP_OPS]
    return {"steps": steps, "step_wall_s": step_wall_s,
            "per_step_s": per_step,
            "share": {c: (s / step_wall_s if step_wall_s > 0 else None) for c, s in per_step.items()},
            "top_ops": [{"op": op, "category": categorise(framework, op), "self_s_per_step": s / steps,
                         "calls_per_step": n / steps} for op, (s, n) in top]}
