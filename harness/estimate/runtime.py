"""How long a run will take, said before it starts: from the committed reference run of the same platform and profile
(docs/runs/<platform>-<profile>, the run folder the docs' numbers are rendered from), each planned (cell, repeat) at
its cell's median recorded time (a cell the reference did not run, or a host with another device: from the step times
it measured, harness.estimate.stepmodel), plus the extra repeats the reference's undecided comparisons took (harness.
sequential), plus what the reference spent outside its cells (data checks, process start, the verdicts between
cells), in proportion. An estimate from recorded times on the reference host, not a measurement of this one.

    python tools/estimate_wall.py RUN --profile P [--repeats N]   (per cell, from any run folder)

A whole profile on a host one books, with its range and what it rests on: harness.estimate.booking (`harness estimate`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.config.cell import Cell
from harness.devices.catalog import kind
from harness.devices.query import run_device
from harness.estimate import frameworkratio, stepmodel
from harness.paths import REPO, RUNS, expected_run, is_reference
from harness.results import measure
from harness.results.store import RunStore
from harness.results.units import duration
from harness.scenarios.operator import turns


def reference(platform: str, profile: str, runs: Path = RUNS, cpu: str | None = None) -> Path | None:
    """The committed run of this platform and profile, the nearest `cpu` (this host's model) where given."""
    folder = expected_run(platform, profile, cpu, runs)
    return folder if folder and (folder / "run.json").is_file() else None


def references(platform: str, profile: str, runs: Path = RUNS, cpu: str | None = None) -> tuple[list[Path], bool]:
    """The committed runs an estimate reads, the first the one whose rounds and time outside the cells it takes, and
    whether that one is of this very platform and profile. On a CPU: that run alone (a CPU run's times are of its own
    host and sizes). On an accelerator: that run where it exists, then every other committed run of the platform
    (their step times serve the cells it lacks, harness.estimate.stepmodel); without any, every committed accelerator
    run (an Ascend host's estimate from a GPU's runs, scaled to its device: harness.estimate.devicescale). `cpu`:
    this host's CPU model, on a CPU (the run of the nearest CPU, harness.paths.expected_run)."""
    exact = reference(platform, profile, runs, cpu)
    if platform == "cpu" or not runs.is_dir():
        return ([exact] if exact else []), exact is not None
    found = sorted(p.parent for p in runs.glob("*/run.json") if p.parent != exact)
    mine = [p for p in found if p.name.startswith(f"{platform}-")]
    others = mine or [p for p in found if not p.name.startswith("cpu-")]
    return ([exact] if exact else []) + others, exact is not None


def _seconds(a: str, b: str) -> float:
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def wall_s(meta: dict[str, Any]) -> float | None:
    """A run's wall time: the sum of its invocations' (an interrupted run's pause is not counted)."""
    spans = [(i.get("started_at"), i.get("finished_at")) for i in meta.get("invocations") or [] if isinstance(i, dict)]
    if not spans or any(not a or not b for a, b in spans):
        return None
    return sum(_seconds(a, b) for a, b in spans)


def per_cell(run: Path) -> dict[str, measure.Sample]:
    """Each cell's recorded seconds per repeat (elapsed_s over its repeats; a cell timed by turns, its share of its
    group's: harness.scenarios.operator.turns.own_seconds)."""
    return {cid: s.measure(turns.own_seconds) for cid, s in measure.summarise(RunStore(run).results()).items()}


def plan(todo: Sequence[tuple[Cell, int]], run: Path | Sequence[Path], *, here: str | None = None,
         synthetic: Iterable[str] = (), skip: Callable[[Cell], str | None] = lambda c: None,
         on_device: bool = False, bounds: bool = False) -> dict[str, Any]:
    """Seconds: `cells` (the planned runs at their reference times, or from its step times: harness.estimate.stepmodel),
    `extra` (the reference's extra repeats of cells in this plan), `outside` (the reference's time outside its cells,
    in proportion), `unknown` (planned runs nothing measured predicts), `by_cell` (each cell's seconds a repeat),
    `how` (each cell's basis), `frameworks` (those the reference runs measured), `ratios` (MindSpore's CPU ratios to
    PyTorch, harness.estimate.frameworkratio: a MindSpore cell priced from a PyTorch donor takes them), `estimate` (the
    stepmodel.Estimate), and `runs`/`extra_runs`/`skipped`; `bounds` (with bounds=True): "low" and "high", each (the
    Estimate with every such MindSpore cell at its model's smallest or largest ratio, its total seconds).
    `run`: the reference run folder, or several whose step times serve (the rounds and the time outside the cells are
    the first one's); `here`: this host's device name, where it differs from the reference's; `synthetic`: the
    datasets this run generates; `skip(cell)`: why a cell will not run here, asked once per cell however many
    estimates (bounds=True: three) read it."""
    folders = [run] if isinstance(run, Path) else list(run)
    why: dict[str, str | None] = {}
    for cell, _ in todo:
        if cell.id not in why:
            why[cell.id] = skip(cell)
    meta = RunStore(folders[0]).read_meta() if folders else {}
    times = per_cell(folders[0]) if folders else {}
    pool = stepmodel.donors(folders[::-1])   # the first folder's cells before the others' (a later one wins)
    frameworks = {d.framework for d in pool.values() if d.ok}   # what the reference runs measured, ok
    others = _other_runs(folders)
    pool.update(_timed_elsewhere(others, pool))
    ratios = frameworkratio.measured({f: d for f, d in others.items() if f.name.startswith("cpu-")})
    ref_fake = set().union(*(_synthetic_of(RunStore(f).read_meta(), pool) for f in folders)) if folders else set()

    def priced(pick: Callable[[Cell], float | None], least: bool = False) -> stepmodel.Estimate:
        return stepmodel.plan(todo, pool, here=here, synthetic=synthetic, ref_synthetic=ref_fake,
                              skip=lambda c: why[c.id], on_device=on_device, least=least,
                              ratio=lambda c, d: (pick(c) or 1.0) if c.framework == frameworkratio.PRICED else 1.0)

    est = priced(lambda c: ratios.central(c.model, c.mode, c.amp))
    more = {"low": priced(lambda c: (ratios.spread(c.model) or (None,))[0], least=True),
            "high": priced(lambda c: (ratios.spread(c.model) or (None, None))[1])} if bounds else {}
    planned: dict[str, int] = {}
    for cell, _ in todo:
        planned[cell.id] = planned.get(cell.id, 0) + 1
    extra_runs = [c for rnd in meta.get("rounds", []) for c, _ in rnd.get("runs", []) if c in planned]
    recorded = sum(sum(s.values) for s in times.values())
    wall = wall_s(meta) or recorded

    def totals(e: stepmodel.Estimate) -> tuple[float, float, float]:
        """(the planned runs, the reference's extra repeats of them, the time outside the cells in proportion)."""
        extra = sum(e.per_cell[c] for c in extra_runs)
        share = (e.total_s + extra) / recorded if recorded else 0.0
        return e.total_s, extra, max(wall - recorded, 0.0) * min(share, 1.0)

    cells, extra, outside = totals(est)
    unknown = sum(k for c, k in planned.items() if est.how[c] == "none")
    return {"cells": cells, "extra": extra, "outside": outside, "unknown": unknown, "runs": len(todo),
            "extra_runs": len(extra_runs), "skipped": est.skipped, "by_cell": est.per_cell, "first": est.first,
            "how": est.how, "frameworks": frameworks, "ratios": ratios, "estimate": est,
            "bounds": {k: (e, sum(totals(e))) for k, e in more.items()}}


def _other_runs(folders: Sequence[Path]) -> dict[Path, dict[str, stepmodel.Donor]]:
    """The committed runs beside the reference folders, each as its donors (read once: their block-timed cells serve
    the kinds the references lack, the CPU runs' pairs of frameworks give MindSpore's ratio). Of the CPU runs, the
    references only (harness.paths.is_reference): another CPU family's run would mix two CPUs' times."""
    if not folders:
        return {}
    runs = folders[0].parent
    return {other: stepmodel.donors(other) for other in sorted(p.parent for p in runs.glob("*/run.json"))
            if other not in folders and (is_reference(other) or not other.name.startswith("cpu-"))}


def _timed_elsewhere(others: dict[Path, dict[str, stepmodel.Donor]],
                     pool: dict[str, stepmodel.Donor]) -> dict[str, stepmodel.Donor]:
    """For the kinds of cell the reference runs lack that are timed by blocks (operators, inference, passes: their time
    is the process's start and a fixed timing budget, harness.scenarios.operator.ops.SWEEP_TIMING, more than the
    device's speed), the same kind's cells of the other committed runs, under ids of their own (never "measured" for a
    planned cell) and unscaled."""
    have = {d.kind for d in pool.values()}
    out: dict[str, stepmodel.Donor] = {}
    for other, donors in others.items():
        for cid, d in donors.items():
            if d.kind not in ("model", "scaling") and d.kind not in have:
                out[f"{other.name}:{cid}"] = replace(d, cell=f"{other.name}:{cid}", device=None)
    return out


def _synthetic_of(meta: dict[str, Any], pool: dict[str, stepmodel.Donor]) -> set[str]:
    """The datasets the reference run generated (run.json's `synthetic`: "all", a comma-separated list, or none)."""
    fake = meta.get("synthetic")
    if not fake:
        return set()
    if fake == "all":
        return {stepmodel.ALL}
    return {n.strip() for n in str(fake).split(",") if n.strip()}


def reference_device(run: Path) -> str | None:
    """The device a reference run measured on: its accelerator (harness.devices.query.run_device), else its CPU's
    model."""
    store = RunStore(run)
    env = store.read_env()
    return run_device(store.read_meta().get("platform"), env) or (env.get("cpu", {}) or {}).get("model")


def shown(run: Path) -> str:
    return str(run.relative_to(REPO) if run.is_relative_to(REPO) else run)


def before_run(todo: Sequence[tuple[Cell, int]], profile: str, platform: str, cap: int, runs: Path = RUNS, *,
               here: str | None = None, cpu: str | None = None, synthetic: Iterable[str] = (),
               skip: Callable[[Cell], str | None] = lambda c: None) -> tuple[str, list[float] | None]:
    """The one line the runner prints before the first cell (`here`: this host's device name, where known), and each
    planned run's estimated seconds in run order (RunProgress keeps what is left current with them; None without a
    reference run): one plan serves both."""
    folders, exact = references(platform, profile, runs, cpu)
    if not folders:
        return (f"estimate: none ({len(todo)} runs planned; no reference run of the {profile} profile on {platform} "
                f"is committed in docs/runs)"), None
    run = folders[0]
    store = RunStore(run)
    env = store.read_env()
    ref_on_device = run_device(store.read_meta().get("platform"), env) is not None
    ref_dev = reference_device(run)
    p = plan(todo, folders, here=here, synthetic=synthetic, skip=skip, on_device=platform != "cpu")
    total = p["cells"] + p["extra"] + p["outside"]
    cores = None if ref_on_device else env.get("cpu", {}).get("cores")
    more = (f" and the {p['extra_runs']} more repeats its comparisons not yet settled took there (up to {cap} a cell)"
            if p["extra_runs"] else "")
    derived = sum(1 for h in p["how"].values() if h in ("like", "model", "kind"))
    notes = []
    if derived:
        notes.append(f"{derived} cells {'it did not run' if exact else 'from'} the step times "
                     f"{'it measured' if exact else 'those runs measured'} (harness.estimate.stepmodel)")
    if here and ref_dev and kind(here) != kind(ref_dev):
        notes.append(f"scaled from {ref_dev} to this host's {here} by their measured ratio where both have committed "
                     f"measurements, else the slower of their dense-peak and memory-bandwidth ratios "
                     f"(harness.estimate.devicescale)")
    if p["estimate"].ratio:
        notes.append(f"{len(p['estimate'].ratio)} MindSpore cells priced from PyTorch's times and MindSpore's CPU "
                     f"ratio to PyTorch (harness.estimate.frameworkratio; a weak proxy for a device's)")
    if p["skipped"]:
        notes.append(f"{p['skipped']} runs skipped here")
    if p["unknown"]:
        notes.append(f"{p['unknown']} planned runs nothing measured predicts")
    source = (f"the reference run {shown(run)}" if exact else
              f"the committed run{'s' if len(folders) > 1 else ''} {', '.join(shown(f) for f in folders)} (no "
              f"{profile} run on {platform} is committed)")
    line = (f"estimate: about {duration(total)} for {p['runs']} runs{more}, from {source} "
            f"({ref_dev or 'the reference host'}{f', {cores} cores' if cores else ''}; another host differs)"
            + "".join(f"; {n}" for n in notes))
    return line, [p["first"][c.id] if r == 0 else p["by_cell"][c.id] for c, r in todo]


def line(todo: Sequence[tuple[Cell, int]], profile: str, platform: str, cap: int, runs: Path = RUNS,
         **kw: Any) -> str:
    """before_run's line alone."""
    return before_run(todo, profile, platform, cap, runs, **kw)[0]
