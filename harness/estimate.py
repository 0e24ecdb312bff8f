"""How long a run will take, said before it starts: from the committed reference run of the same platform and profile
(docs/runs/<platform>-<profile>, the run folder the docs' numbers are rendered from), each planned (cell, repeat) at
its cell's median recorded time (a cell the reference did not run, or a host with another device: from the step times
it measured, harness.stepmodel), plus the extra repeats the reference's undecided comparisons took (harness.
sequential), plus what the reference spent outside its cells (data checks, process start, the verdicts between
cells), in proportion. An estimate from recorded times on the reference host, not a measurement of this one.

    python tools/estimate_wall.py RUN --profile P [--repeats N]   (per cell, from any run folder)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import measure, stepmodel, turns
from harness.cell import Cell
from harness.profiling.peaks import run_device
from harness.progress import duration
from harness.store import RunStore

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "docs" / "runs"


def reference(platform: str, profile: str, runs: Path = RUNS) -> Path | None:
    folder = runs / f"{platform}-{profile}"
    return folder if (folder / "run.json").is_file() else None


def references(platform: str, profile: str, runs: Path = RUNS) -> tuple[list[Path], bool]:
    """The committed runs an estimate reads, the first the one whose rounds and time outside the cells it takes, and
    whether that one is of this very platform and profile. On a CPU: that run alone (a CPU run's times are of its own
    host and sizes). On an accelerator: that run where it exists, then every other committed run of the platform
    (their step times serve the cells it lacks, harness.stepmodel); without any, every committed accelerator run (an
    Ascend host's estimate from a GPU's runs, scaled by the devices' peaks)."""
    exact = reference(platform, profile, runs)
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
    group's: harness.turns.own_seconds)."""
    return {cid: s.measure(turns.own_seconds) for cid, s in measure.summarise(RunStore(run).results()).items()}


def plan(todo: Sequence[tuple[Cell, int]], run: Path | Sequence[Path], *, here: str | None = None,
         synthetic: Iterable[str] = (), skip: Callable[[Cell], str | None] = lambda c: None,
         on_device: bool = False) -> dict[str, Any]:
    """Seconds: `cells` (the planned runs at their reference times, or from its step times: harness.stepmodel),
    `extra` (the reference's extra repeats of cells in this plan), `outside` (the reference's time outside its cells,
    in proportion), `unknown` (planned runs nothing measured predicts), `by_cell` (each cell's seconds a repeat),
    `how` (each cell's basis), `frameworks` (those the reference runs measured), and `runs`/`extra_runs`/`skipped`.
    `run`: the reference run folder, or several whose step times serve (the rounds and the time outside the cells are
    the first one's); `here`: this host's device name, where it differs from the reference's; `synthetic`: the
    datasets this run generates; `skip(cell)`: why a cell will not run here."""
    folders = [run] if isinstance(run, Path) else list(run)
    meta = RunStore(folders[0]).read_meta() if folders else {}
    times = per_cell(folders[0]) if folders else {}
    pool = stepmodel.donors(folders[::-1])   # the first folder's cells before the others' (a later one wins)
    frameworks = {d.framework for d in pool.values() if d.ok}   # what the reference runs measured, ok
    pool.update(_timed_elsewhere(folders, pool))
    ref_fake = set().union(*(_synthetic_of(RunStore(f).read_meta(), pool) for f in folders)) if folders else set()
    est = stepmodel.plan(todo, pool, here=here, synthetic=synthetic, ref_synthetic=ref_fake, skip=skip,
                         on_device=on_device)
    planned: dict[str, int] = {}
    for cell, _ in todo:
        planned[cell.id] = planned.get(cell.id, 0) + 1
    unknown = sum(k for c, k in planned.items() if est.how[c] == "none")
    extra_runs = [c for rnd in meta.get("rounds", []) for c, _ in rnd.get("runs", []) if c in planned]
    extra = sum(est.per_cell[c] for c in extra_runs)
    recorded = sum(sum(s.values) for s in times.values())
    wall = wall_s(meta) or recorded
    share = (est.total_s + extra) / recorded if recorded else 0.0
    return {"cells": est.total_s, "extra": extra, "outside": max(wall - recorded, 0.0) * min(share, 1.0),
            "unknown": unknown, "runs": len(todo), "extra_runs": len(extra_runs), "skipped": est.skipped,
            "by_cell": est.per_cell, "first": est.first, "how": est.how, "frameworks": frameworks}


def _timed_elsewhere(folders: Sequence[Path], pool: dict[str, stepmodel.Donor]) -> dict[str, stepmodel.Donor]:
    """For the kinds of cell the reference runs lack that are timed by blocks (operators, inference, passes: their time
    is the process's start and a fixed timing budget, harness.operators.SWEEP_TIMING, more than the device's speed),
    the same kind's cells of the other committed runs, under ids of their own (never "measured" for a planned cell)
    and unscaled."""
    if not folders:
        return {}
    have = {d.kind for d in pool.values()}
    runs = folders[0].parent
    out: dict[str, stepmodel.Donor] = {}
    for other in sorted(p.parent for p in runs.glob("*/run.json") if p.parent not in folders):
        for cid, d in stepmodel.donors(other).items():
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
    """The device a reference run measured on: its accelerator (harness.profiling.peaks.run_device), else its CPU's
    model."""
    store = RunStore(run)
    env = store.read_env()
    return run_device(store.read_meta().get("platform"), env) or (env.get("cpu", {}) or {}).get("model")


def _shown(run: Path) -> str:
    return str(run.relative_to(REPO) if run.is_relative_to(REPO) else run)


def before_run(todo: Sequence[tuple[Cell, int]], profile: str, platform: str, cap: int, runs: Path = RUNS, *,
               here: str | None = None, synthetic: Iterable[str] = (),
               skip: Callable[[Cell], str | None] = lambda c: None) -> tuple[str, list[float] | None]:
    """The one line the runner prints before the first cell (`here`: this host's device name, where known), and each
    planned run's estimated seconds in run order (RunProgress keeps what is left current with them; None without a
    reference run): one plan serves both."""
    folders, exact = references(platform, profile, runs)
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
                     f"{'it measured' if exact else 'those runs measured'} (harness.stepmodel)")
    if here and ref_dev and here != ref_dev:
        notes.append(f"scaled from {ref_dev} to this host's {here} by their dense peaks")
    if p["skipped"]:
        notes.append(f"{p['skipped']} runs skipped here")
    if p["unknown"]:
        notes.append(f"{p['unknown']} planned runs nothing measured predicts")
    source = (f"the reference run {_shown(run)}" if exact else
              f"the committed run{'s' if len(folders) > 1 else ''} {', '.join(_shown(f) for f in folders)} (no "
              f"{profile} run on {platform} is committed)")
    line = (f"estimate: about {duration(total)} for {p['runs']} runs{more}, from {source} "
            f"({ref_dev or 'the reference host'}{f', {cores} cores' if cores else ''}; another host differs)"
            + "".join(f"; {n}" for n in notes))
    return line, [p["first"][c.id] if r == 0 else p["by_cell"][c.id] for c, r in todo]


def line(todo: Sequence[tuple[Cell, int]], profile: str, platform: str, cap: int, runs: Path = RUNS,
         **kw: Any) -> str:
    """before_run's line alone."""
    return before_run(todo, profile, platform, cap, runs, **kw)[0]


# The devices the accelerator profile is sized for, as the reference runs' device names read (harness.stepmodel.peak).
BOOKINGS = {"V100": ("cuda", "Tesla V100-SXM2-32GB", 1), "H100": ("cuda", "NVIDIA H100 80GB HBM3", 1),
            "910x8": ("ascend", "Ascend910", 8)}


def project(matrix, profile: str, platform: str, *, run: Path | Sequence[Path], device: str | None, devices: int,
            synthetic: Iterable[str] = (), memory: tuple[float | None, str] | None = None) -> dict[str, Any]:
    """The whole profile's estimated seconds on a host of `devices` devices named `device` (None: the reference's),
    every framework installed, from the reference run folder(s) `run` (of any platform: an Ascend host's estimate
    scales a GPU run): per model (operators together), the total, the range up to the profile's max_repeats, and
    the cells' bases per model. `memory`: each device's (GiB, source): cells predicted not to fit are skipped, as
    the run skips them (harness.devicememory)."""
    from harness.host import Host
    from harness.matrix import schedule

    host = Host(platform, profile, devices, {}, matrix, *(memory or (None, "not given")))
    todo = schedule(matrix.expand(profile))
    folders = [run] if isinstance(run, Path) else list(run)
    ref_dev = reference_device(folders[0])
    other = device if device and device != ref_dev else None
    p = plan(todo, folders, here=other, synthetic=synthetic, skip=host.verdict, on_device=platform != "cpu")
    groups: dict[str, float] = {}
    for cell, repeat in todo:
        key = cell.model if cell.kind in ("model", "scaling") else cell.kind
        groups[key or cell.kind] = groups.get(key or cell.kind, 0.0) + (p["first"] if repeat == 0 else
                                                                        p["by_cell"])[cell.id]
    bases: dict[str, int] = {}
    per_model: dict[str, dict[str, int]] = {}
    cells = {c.id: c for c, _ in todo}
    for cid, h in p["how"].items():
        bases[h] = bases.get(h, 0) + 1
        cell = cells.get(cid)
        if cell is not None and cell.kind in ("model", "scaling") and not host.verdict(cell):
            counts = per_model.setdefault(cell.model or cell.kind, {})
            counts[h] = counts.get(h, 0) + 1
    # The most the sequential repeats can add: every cell a comparison rests on (claim_repeats > repeats) run to the
    # profile's cap, at its estimated seconds a repeat, and the time outside the cells in proportion.
    cap = matrix.max_repeats(profile, None, None)
    more = sum(p["by_cell"][c.id] * (cap - c.repeats) for c in cells.values()
               if c.repeats > 1 and c.repeats < cap and not host.verdict(c))
    total = p["cells"] + p["extra"] + p["outside"]
    upper = total + more * (1 + p["outside"] / max(p["cells"] + p["extra"], 1e-9))
    return {"total_s": total, "upper_s": max(upper, total), "cap": cap, "groups": groups, "bases": bases,
            "per_model": per_model, "runs": p["runs"], "skipped": p["skipped"], "device": device or ref_dev,
            "reference_device": ref_dev, "devices": devices, "platform": platform,
            "reference_frameworks": p["frameworks"]}


def projection_lines(proj: dict[str, Any], run: Path | Sequence[Path]) -> list[str]:
    """What `harness estimate` prints: the total, the time per model, and what it rests on."""
    shown = ", ".join(_shown(f) for f in ([run] if isinstance(run, Path) else run))
    b = proj["bases"]
    out = [f"{proj['device']} x {proj['devices']}: about {duration(proj['total_s'])} for {proj['runs']} runs "
           f"({proj['skipped']} skipped there), up to {duration(proj['upper_s'])} if every comparison takes its "
           f"repeats to the profile's max_repeats ({proj['cap']}), from {shown} ({proj['reference_device']})"]
    for name, s in sorted(proj["groups"].items(), key=lambda kv: -kv[1]):
        out.append(f"    {name:12} {duration(s)}")
    out.append(f"    cells: {b.get('measured', 0)} measured there, {b.get('like', 0)} from a cell of the same model "
               f"and precision, {b.get('model', 0)} from the same model at another precision, {b.get('kind', 0)} "
               f"from another cell of their kind, {b.get('none', 0)} with nothing to go on"
               + (f"; scaled by the dense peaks of {proj['reference_device']} and {proj['device']}"
                  if proj["device"] != proj["reference_device"] else ""))
    if not proj.get("reference_frameworks", {"mindspore"}) & {"mindspore"}:
        out.append("    MindSpore's cells at PyTorch's times: no committed run measured MindSpore on this platform")
    # Per model: how many of its cells rest on a measured cell of the same model and precision, and on what device.
    on = proj["reference_device"] + ("" if proj["device"] == proj["reference_device"] else
                                     f", not on a {proj['device']}: scaled")
    for model, counts in sorted(proj.get("per_model", {}).items()):
        same = counts.get("measured", 0) + counts.get("like", 0)
        rest = sum(counts.values()) - same
        out.append(f"    {model:12} {same} of its {sum(counts.values())} cells rest on a measured cell of the same "
                   f"model and precision ({on})" + (f"; {rest} on less" if rest else ""))
    out += [f"    not in the total: {line}" for line in _not_in_total(proj["platform"])]
    return out


def _not_in_total(platform: str) -> list[str]:
    """What a booking costs besides the cells, each on its own line: the image build and its downloads (the
    preflight's host.toml [build.*], measured where it says so) and, on a GPU, MindSpore's first-run PTX JIT."""
    from harness.preflight import data

    try:
        build = data.host()["build"].get(platform)
    except (data.DataError, OSError, KeyError):
        return []
    out = [f"the image build: {build['time']}", f"its downloads: {build['download']}",
           "the datasets: about 0.4 GB, downloaded and verified before the first cell (not timed here)"]
    if platform == "cuda":
        out.append("MindSpore's first run on an H100 (sm_90): the driver compiles its kernels from PTX, once per "
                   "host and driver (docs/platforms/cuda.md; not measured here, MindSpore's FAQ gives about 5 "
                   "minutes on a V100 for a release whose kernels were PTX)")
    return out
