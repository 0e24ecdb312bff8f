"""A profile's estimated time on a host one books (`harness estimate`, and the docs' table of hosts:
harness.docs.accelerator), from the committed runs' step times (harness.estimate.runtime.plan), and what it rests on:

- a range: from the planned repeats with every MindSpore cell priced from a PyTorch cell at its model's smallest CPU
  ratio to PyTorch (harness.estimate.frameworkratio), up to every comparison's repeats at the profile's max_repeats
  with every such cell at the largest;
- the cells a device cannot hold left out, as the run leaves them out (harness.devices.memory);
- the device factor and what it rests on (harness.estimate.devicescale): the two devices' own measurements, or a stated
rule;
- per model, how many of its cells rest on a measured cell of the same model, precision and device kind;
- on lines of their own, what the booking costs besides the cells (the image build, the downloads, MindSpore's first
  run's PTX JIT on a GPU).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from harness.config.cell import Cell
from harness.devices import catalog
from harness.devices.catalog import kind
from harness.devices.memory import Plan
from harness.estimate import devicescale, frameworkratio
from harness.estimate import runtime as estimate
from harness.results.units import duration

if TYPE_CHECKING:
    from harness.host.plan import Host

# The devices the accelerator profile is sized for, named as their tools report them (harness.devices.catalog):
# (platform, device, devices).
BOOKINGS = {"V100": catalog.booking("V100-32"), "V100-16": catalog.booking("V100-16"),
            "V100-32": catalog.booking("V100-32"), "H100": catalog.booking("H100-80"),
            "H200": catalog.booking("H200-141"), "910x8": catalog.booking("910-32", 8)}
TRAINS = ("model", "scaling")


class Decision(NamedTuple):
    """What the host decided for a cell, asked once: why it does not run (None: it runs), and how it runs."""
    cell: Cell
    verdict: str | None
    plan: Plan


def decide(host: Host, cells: Iterable[Cell]) -> dict[str, Decision]:
    """Each cell's verdict and plan on the host (harness.host.plan.Host), asked once per cell."""
    out: dict[str, Decision] = {}
    for c in cells:
        if c.id not in out:
            out[c.id] = Decision(c, host.verdict(c), host.plan(c))
    return out


def project(matrix, profile: str, platform: str, *, run: Path | Sequence[Path], device: str | None, devices: int,
            synthetic: Iterable[str] = (), memory: tuple[float | None, str] | None = None) -> dict[str, Any]:
    """The whole profile's estimated seconds on a host of `devices` devices named `device` (None: the reference's),
    every framework installed, from the reference run folder(s) `run` (of any platform: an Ascend host's estimate
    scales a GPU run): per model (operators together), the total, the range (module docstring), the cells' bases and
    per model their device kinds. `memory`: each device's (GiB, source): cells predicted not to fit are skipped, as
    the run skips them (harness.devices.memory). `decisions`: each cell's Decision, the host asked once per cell."""
    from harness.config.matrix import schedule
    from harness.host.plan import Host

    host = Host(platform, profile, devices, {}, matrix, *(memory or (None, "not given")))
    todo = schedule(matrix.expand(profile))
    folders = [run] if isinstance(run, Path) else list(run)
    ref_dev = estimate.reference_device(folders[0])
    target = device or ref_dev
    other = device if device and kind(device) != kind(ref_dev) else None
    decided = decide(host, (c for c, _ in todo))
    p = estimate.plan(todo, folders, here=other, synthetic=synthetic, skip=lambda c: decided[c.id].verdict,
                      on_device=platform != "cpu", bounds=True)
    est = p["estimate"]
    groups: dict[str, float] = {}
    unknown: dict[str, int] = {}   # per group, the runs nothing measured prices: unknown, never 0 s
    for cell, repeat in todo:
        key = (cell.model if cell.kind in TRAINS else cell.kind) or cell.kind
        groups[key] = groups.get(key, 0.0) + (p["first"] if repeat == 0 else p["by_cell"])[cell.id]
        if p["how"].get(cell.id) == "none":
            unknown[key] = unknown.get(key, 0) + 1
    bases: dict[str, int] = {}
    for h in p["how"].values():
        bases[h] = bases.get(h, 0) + 1
    cells = {c.id: c for c, _ in todo}
    running = [d.cell for d in decided.values() if d.cell.kind in TRAINS and not d.verdict]
    # The most the sequential repeats can add: every cell a comparison rests on (claim_repeats > repeats) run to the
    # profile's cap, at its estimated seconds a repeat (MindSpore's at the largest ratio), and the time outside the
    # cells in proportion.
    cap = matrix.max_repeats(profile, None, None)
    high, high_total = p["bounds"]["high"]
    more = sum(high.per_cell[d.cell.id] * (cap - d.cell.repeats) for d in decided.values()
               if d.cell.repeats > 1 and d.cell.repeats < cap and not d.verdict)
    total = p["cells"] + p["extra"] + p["outside"]
    upper = high_total + more * (1 + p["outside"] / max(p["cells"] + p["extra"], 1e-9))
    used = {(c.model, catalog.precision(c.amp)): est.scale[c.id] for c in running if c.id in est.scale}
    return {"total_s": total, "low_s": min(p["bounds"]["low"][1], total), "upper_s": max(upper, total), "cap": cap,
            "groups": groups, "unknown": unknown, "bases": bases, "per_model": _per_model(running, est, target),
            "runs": p["runs"],
            "skipped": p["skipped"], "device": target, "reference_device": ref_dev, "devices": devices,
            "platform": platform, "reference_frameworks": p["frameworks"], "ratios": p["ratios"],
            "ms_priced": sorted({cells[c].model for c in est.ratio if cells[c].model}),
            # cells that take their batch in micro-batches there (harness.devices.memory.plan): priced at whole batches
            "accumulated": sorted({f"{c.model} {catalog.precision(c.amp)} ({pl.label})"
                                   for c in running if (pl := decided[c.id].plan).steps > 1 and pl.label}),
            "device_basis": devicescale.basis(ref_dev, target, used), "device_short": devicescale.short(used),
            "decisions": decided, "todo": todo, "plan": p}


def hours(proj: dict[str, Any], matrix, profile: str, booked: float, *, owe: bool = True):
    """The profile on that host planned to `booked` hours (harness.estimate.fit): from the projection's own plan and
    decisions; `owe`: take the build, its downloads and the first-run compilation off the hours (a booking estimated
    ahead; a run under way has spent its build already)."""
    from harness.claims import reads
    from harness.estimate import fit

    todo, decided = proj["todo"], proj["decisions"]
    cells = [c for c, r in todo if r == 0]
    skipped = {cid: d.verdict for cid, d in decided.items() if d.verdict}
    reserved = fit.owed(proj["platform"], {c.framework for c in cells}) if owe else []
    budget = booked * 3600 - sum(s for _, s in reserved)
    return fit.fit(fit.entries(todo, proj["plan"]), reads.needs(cells), budget, hours=booked, skipped=skipped,
                   cap=proj["cap"], reserved=reserved)


def _per_model(running: Sequence[Any], est: Any, target: str | None) -> dict[str, dict[str, Any]]:
    """Per model: its cells that run, how many rest on a measured cell of the same model and precision on the
    target's device kind (`here`; of them `own`: the same framework and mode too), on one measured on another device
    kind and scaled (`scaled`, with those kinds), and on less (another precision, nothing)."""
    out: dict[str, dict[str, Any]] = {}
    for c in running:
        m = out.setdefault(c.model or c.kind, {"cells": 0, "here": 0, "own": 0, "scaled": 0, "less": 0,
                                               "kinds": set()})
        m["cells"] += 1
        donor, how = est.donor.get(c.id), est.how.get(c.id)
        if donor is None or how not in ("measured", "like"):
            m["less"] += 1
        elif kind(donor.device) == kind(target):
            m["here"] += 1
            m["own"] += (donor.framework, donor.mode) == (c.framework, c.mode)
        else:
            m["scaled"] += 1
            m["kinds"].add(donor.device or "a CPU")
    return out


def projection_lines(proj: dict[str, Any], run: Path | Sequence[Path]) -> list[str]:
    """What `harness estimate` prints: the total and its range, the time per model, and what it rests on."""
    shown = ", ".join(estimate.shown(f) for f in ([run] if isinstance(run, Path) else run))
    b = proj["bases"]
    priced = proj["ms_priced"]
    lost = sum(proj.get("unknown", {}).values())
    out = [f"{proj['device']} x {proj['devices']}: about {duration(proj['total_s'])} for {proj['runs']} runs "
           f"({proj['skipped']} skipped there" + (f"; {lost} unknown, not in the total or its range" if lost else "")
           + f"), from {shown} ({proj['reference_device']})",
           f"    range: {duration(proj['low_s'])} to {duration(proj['upper_s'])}: from the planned repeats"
           + (" with MindSpore at each model's smallest CPU ratio" if priced else "")
           + " and a cell that stops at its target at its first evaluation where no measured cell says when it "
             "reaches it"
           + f", up to every comparison's repeats at the profile's max_repeats ({proj['cap']})"
           + (" with MindSpore at the largest" if priced else "")]
    unknown = proj.get("unknown", {})
    for name, s in sorted(proj["groups"].items(), key=lambda kv: -kv[1]):
        k = unknown.get(name, 0)
        if k:   # never 0 s: what nothing measured prices is said to be unknown
            out.append(f"    {name:12} " + (f"{duration(s)} and " if s else "") + f"{k} runs unknown (no committed "
                       f"cell of its model or kind prices them; not in the total)")
        else:
            out.append(f"    {name:12} {duration(s)}")
    out.append(f"    cells: {b.get('measured', 0)} measured there, {b.get('like', 0)} from a cell of the same model "
               f"and precision, {b.get('model', 0)} from the same model at another precision, {b.get('kind', 0)} "
               f"from another cell of their kind, {b.get('none', 0)} with nothing to go on")
    out.append(f"    device: {proj['device_basis']}")
    out += _mindspore_lines(proj)
    # Per model: how many of its cells rest on a measured cell of the same model, precision and device kind.
    here = kind(proj["device"])
    for model, m in sorted(proj.get("per_model", {}).items()):
        line = (f"    {model:12} {m['here']} of its {m['cells']} cells rest on a measured cell of the same model, "
                f"precision and device kind ({here}; {m['own']} of the same framework and mode)")
        if m["scaled"]:
            line += f", {m['scaled']} on one measured on {', '.join(sorted(m['kinds']))}, scaled"
        if m["less"]:
            line += f", {m['less']} on less (another precision, or nothing)"
        out.append(line)
    if proj.get("accumulated"):
        out.append(f"    priced at the whole batch's step time: {', '.join(proj['accumulated'])}, which take their "
                   f"batch in micro-batches on this device (gradient accumulation: more, smaller kernels, slower per "
                   f"sample; not measured on a device)")
    out += [f"    not in the total: {line}" for line in _not_in_total(proj["platform"])]
    return out


def _mindspore_lines(proj: dict[str, Any]) -> list[str]:
    """How MindSpore's cells are priced: from its own cells where a reference run measured MindSpore, else from
    PyTorch's at MindSpore's CPU ratio, said plainly to be a weak proxy."""
    ratios: frameworkratio.Ratios = proj["ratios"]
    if not proj["ms_priced"]:
        return ([] if "mindspore" in proj.get("reference_frameworks", {"mindspore"}) else
                ["    MindSpore's cells at PyTorch's times: no committed run measured MindSpore on this platform"])
    each = "; ".join(f"{m}: {ratios.overall(m):.2f}, {lo:.2f}-{hi:.2f}"
                     for m in proj["ms_priced"] if (s := ratios.spread(m)) for lo, hi in [s])
    bare = [m for m in proj["ms_priced"] if not ratios.spread(m)]
    return [f"    MindSpore priced from its CPU ratio to PyTorch ({each}): no committed run measured MindSpore on "
            f"this platform, so its cells take PyTorch's times with their training steps multiplied by MindSpore's "
            f"steady seconds per sample over PyTorch eager's at the same precision in the committed CPU runs "
            f"({', '.join(ratios.runs())}; per mode and AMP level where measured, the model's median and range shown)"
            + (f"; at PyTorch's times with no ratio: {', '.join(bare)}" if bare else ""),
            "    a CPU ratio is a weak proxy for a GPU's or an NPU's: on a CPU a step is the framework's host code and "
            "CPU kernels, on a device its device kernels and how it launches them"]


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
