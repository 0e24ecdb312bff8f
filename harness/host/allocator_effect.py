"""What the host's memory allocator moves, measured: Figure 5's operator ratios and C1's per-model ratios and verdicts,
on one host under each configuration a reviewer's native run can end up with, two runs each, committed under
docs/runs/allocator/ (`harness run --profile quick --only` the operator cells and C1's six model cells).

    summarise(folders)   -> the summary: per run its allocators, load averages, ratios and verdicts
    main(--write|--check) keeps docs/runs/allocator/effect.json equal to what the runs give

The summary is a committed JSON file so that the check's allocator row and the report's banner can quote it through
harness.host.configdiff, which reads it with the standard library only (the check runs before any .venv); the page's
table (docs/methodology/allocator.md) is rendered from the same runs by `python -m harness docs --write`.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.claims import evaluate
from harness.claims.common import _mname
from harness.claims.paper import BASELINE, PAPER_FASTER
from harness.config import cellid
from harness.host import configdiff
from harness.paths import REPO, RUNS, expected_run
from harness.results import measure
from harness.results.store import RunStore

FOLDER = RUNS / "allocator"
SUMMARY = REPO / configdiff.EFFECT
EXPECTED = expected_run("cpu", "quick")     # the expected results' run, summarised the same way
C1_MODELS = tuple(PAPER_FASTER)   # the models C1 compares
# The one the banner and the check quote: the dense workload, where the paper found MindSpore faster and where
# PyTorch's allocator was measured at the process level (docs/at-best/process_gap-*-pytorch-*.json).
HEADLINE = next(m for m, faster in PAPER_FASTER.items() if faster == "mindspore")
VERDICTS = ("C1", "O1", "O2", "O3")
FIX = "python -m harness.host.allocator_effect --write"


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def _interval(iv: tuple[float, float | None] | None) -> list[float | None] | None:
    return None if iv is None else [_round(iv[0]), _round(iv[1])]


def operator_label(op: str, params: int | None, direction: str | None, dtype: str | None) -> str:
    """One operator configuration as Figure 5's table names it: op, parameter count, direction (dtype unless fp32)."""
    return f"{op} {params or 0:,} {direction}" + ("" if dtype in (None, "fp32") else f" {dtype}")


@lru_cache(maxsize=16)   # the docs' block and the summary's check read the same committed folders in one process
def summarise_run(folder: Path) -> dict[str, Any]:
    """One run folder: its allocators, when and under what load it ran, Figure 5's ratios (MindSpore GRAPH / PyTorch
    eager, with their intervals), C1's MindSpore/PyTorch throughput ratio per model and the verdicts it reaches."""
    store = RunStore(folder)
    store.require_run()
    meta, env, results = store.read_meta(), store.read_env(), store.results()
    index = measure.summarise(r for r in results if r.get("platform") == "cpu")
    ops = [{"config": operator_label(c.op, c.params, c.direction, c.dtype), "ratio": _round(c.ratio("graph")),
            "interval": _interval(c.ratio_interval("graph"))}
           for c in measure.operator_ratios(index) if c.ratio("graph") is not None]
    c1 = {}
    for model in C1_MODELS:
        ids = {fw: cellid.model_id(model, fw, mode, amp, 1, 1) for fw, (mode, amp) in BASELINE.items()}
        ms, pt = index.get(ids["mindspore"]), index.get(ids["pytorch"])
        key = "mean_throughput_other_epochs"
        if ms and pt and ms.value(key) and pt.value(key):
            c1[model] = {"ratio": _round(ms.value(key) / pt.value(key)),
                         "interval": _interval(measure.ratio_interval(ms.measure(key), pt.measure(key)))}
    claims = {c.id: c.verdict for c in evaluate(results, platform="cpu", profile=meta.get("profile"))}
    first = next((i for i in meta.get("invocations") or [] if isinstance(i, dict)), {})
    return {"run": folder.name, "started_at": meta.get("created_at"), "cpu": (env.get("cpu") or {}).get("model"),
            "allocators": configdiff.allocator_signature(env),
            "pytorch_model_allocator": configdiff.allocators(env).get(("pytorch", "model")),
            "load_average": {"start": first.get("load_average_at_start"),
                             "finish": first.get("load_average_at_finish")},
            "operators": ops, "c1": c1, "verdicts": {v: claims.get(v) for v in VERDICTS}}


def summarise(folders: Sequence[Path], expected: Path | None = EXPECTED) -> dict[str, Any]:
    """Every committed run under docs/runs/allocator/ and the expected run beside them. The runs are compared with
    the first of them that has the expected results' allocators (the same host: the expected run's host may have
    another CPU, which moves every ratio on its own), each run's operator configurations outside that run's
    intervals listed: for the second run of that configuration, the host's own repeatability; for the others, what
    the allocator moves."""
    if expected is None:
        raise FileNotFoundError("no committed expected run (docs/runs/cpu-quick/env.json) to summarise beside the "
                                "allocator runs")
    ref = copy.deepcopy(summarise_run(expected))    # copies: the cached ones stay as read
    runs = [copy.deepcopy(summarise_run(f)) for f in folders]
    base = next((r for r in runs if r["allocators"] == ref["allocators"]), runs[0] if runs else None)
    for r in runs:
        r["baseline"] = base["run"]
        r["operators_outside_baseline"] = [] if r is base else configdiff.outside(r, base)
    return {"expected": ref, "runs": runs, "headline": HEADLINE, "headline_name": _mname(HEADLINE)}


def _cell(x: dict[str, Any] | None) -> str:
    """A ratio with its interval's half-width in percent of it, as Figure 5's table in the issue of record shows."""
    if not x or x.get("ratio") is None:
        return "-"
    iv = x.get("interval")
    if not iv or iv[1] is None:
        return f"{x['ratio']:.3f}"
    return f"{x['ratio']:.3f} ±{(iv[1] - iv[0]) / 2 / x['ratio'] * 100:.1f}%"


def table(runs: Sequence[Any]) -> str:
    """docs/methodology/allocator.md's block: the expected run (runs[0]) and the allocator runs beside it, one column
    each: Figure 5's ratios, C1's per model, the verdicts, and the load averages each ran under."""
    data = summarise([r.path for r in runs[1:]], expected=runs[0].path)
    cols = [data["expected"], *data["runs"]]
    names = [f"expected ({runs[0].name})", *(r["run"] for r in data["runs"])]
    pt = [c["pytorch_model_allocator"] for c in cols]
    heads = [f"{n}<br>{c['cpu']}<br>PyTorch: {a}" for n, a, c in zip(names, pt, cols, strict=True)]
    lines = ["| | " + " | ".join(heads) + " |",
             "| --- |" + " --- |" * len(cols)]
    configs = [o["config"] for o in data["expected"]["operators"]]
    for cfg in configs:
        got = [next((o for o in c["operators"] if o["config"] == cfg), None) for c in cols]
        lines.append(f"| Figure 5: {cfg} | " + " | ".join(_cell(g) for g in got) + " |")
    lines.append("| Figure 5: ratios outside the intervals of " + data["runs"][0]["baseline"] + " | - | "
                 + " | ".join("-" if r["run"] == r["baseline"] else str(len(r["operators_outside_baseline"]))
                              for r in data["runs"]) + " |")
    for model in C1_MODELS:
        lines.append(f"| C1: {model} MindSpore/PyTorch | " + " | ".join(_cell(c["c1"].get(model)) for c in cols) + " |")
    for v in VERDICTS:
        lines.append(f"| {v} | " + " | ".join(str(c["verdicts"].get(v)) for c in cols) + " |")

    def load(c: dict[str, Any]) -> str:
        la = c["load_average"]
        return " → ".join(" ".join(f"{x:.2f}" for x in v) if v else "?" for v in (la["start"], la["finish"]))
    lines.append("| load average (1, 5, 15 min) at start → finish | " + " | ".join(load(c) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def folders(root: Path = FOLDER) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/run.json"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.host.allocator_effect", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {configdiff.EFFECT}")
    args = ap.parse_args(argv)
    text = json.dumps(summarise(folders()), indent=1, sort_keys=True) + "\n"
    if args.write:
        SUMMARY.write_text(text)
        return 0
    current = SUMMARY.read_text() if SUMMARY.is_file() else ""
    if current != text:
        print(f"error: {configdiff.EFFECT} is not what the runs beside it give; run `{FIX}`",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
