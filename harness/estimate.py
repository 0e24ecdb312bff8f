"""How long a run will take, said before it starts: from the committed reference run of the same platform and profile
(docs/runs/<platform>-<profile>, the run folder the docs' numbers are rendered from), each planned (cell, repeat) at
its cell's median recorded time, plus the extra repeats the reference's undecided comparisons took (harness.
sequential), plus what the reference spent outside its cells (data checks, process start, the verdicts between
cells), in proportion. An estimate from recorded times on the reference host, not a measurement of this one.

    python tools/estimate_wall.py RUN --profile P [--repeats N]   (per cell, from any run folder)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import measure
from harness.cell import Cell
from harness.progress import duration
from harness.store import RunStore

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "docs" / "runs"


def reference(platform: str, profile: str, runs: Path = RUNS) -> Path | None:
    folder = runs / f"{platform}-{profile}"
    return folder if (folder / "run.json").is_file() else None


def _seconds(a: str, b: str) -> float:
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def wall_s(meta: dict[str, Any]) -> float | None:
    """A run's wall time: the sum of its invocations' (an interrupted run's pause is not counted)."""
    spans = [(i.get("started_at"), i.get("finished_at")) for i in meta.get("invocations") or [] if isinstance(i, dict)]
    if not spans or any(not a or not b for a, b in spans):
        return None
    return sum(_seconds(a, b) for a, b in spans)


def per_cell(run: Path) -> dict[str, measure.Sample]:
    """Each cell's recorded seconds per repeat (elapsed_s over its repeats)."""
    return {cid: s.measure("elapsed_s") for cid, s in measure.summarise(RunStore(run).results()).items()}


def plan(todo: Sequence[tuple[Cell, int]], run: Path) -> dict[str, float]:
    """Seconds: `cells` (the planned runs at their reference times), `extra` (the reference's extra repeats of cells
    in this plan), `outside` (the reference's time outside its cells, in proportion), `unknown` (planned runs the
    reference lacks), and `runs`/`extra_runs`."""
    store = RunStore(run)
    meta = store.read_meta()
    times = per_cell(run)
    planned = {}
    for cell, _ in todo:
        planned[cell.id] = planned.get(cell.id, 0) + 1
    cells = sum((times[c].median or 0.0) * k for c, k in planned.items() if c in times)
    unknown = sum(k for c, k in planned.items() if c not in times)
    extra_runs = [c for rnd in meta.get("rounds", []) for c, _ in rnd.get("runs", []) if c in planned]
    extra = sum(times[c].median or 0.0 for c in extra_runs if c in times)
    recorded = sum(sum(s.values) for s in times.values())
    wall = wall_s(meta) or recorded
    share = (cells + extra) / recorded if recorded else 0.0
    return {"cells": cells, "extra": extra, "outside": max(wall - recorded, 0.0) * share, "unknown": unknown,
            "runs": len(todo), "extra_runs": len(extra_runs)}


def line(todo: Sequence[tuple[Cell, int]], profile: str, platform: str, cap: int, runs: Path = RUNS) -> str:
    """The one line the runner prints before the first cell."""
    run = reference(platform, profile, runs)
    if run is None:
        return (f"estimate: none ({len(todo)} runs planned; no reference run of the {profile} profile on {platform} "
                f"is committed in docs/runs)")
    p = plan(todo, run)
    total = p["cells"] + p["extra"] + p["outside"]
    env = RunStore(run).read_env()
    shown = run.relative_to(REPO) if run.is_relative_to(REPO) else run
    host = f"{env.get('cpu', {}).get('model') or 'the reference host'}"
    cores = env.get("cpu", {}).get("cores")
    more = (f" and the {p['extra_runs']} more repeats its comparisons not yet settled took there (up to {cap} a cell)"
            if p["extra_runs"] else "")
    return (f"estimate: about {duration(total)} for {p['runs']} runs{more}, from the reference run {shown} "
            f"({host}{f', {cores} cores' if cores else ''}; another host differs)"
            + (f"; {p['unknown']} planned runs are not in it" if p["unknown"] else ""))
