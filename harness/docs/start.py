"""ARTIFACT.md's start blocks, one per reviewer's host (a laptop CPU, one GPU, an Ascend server): the commands in
order, each with its time, disk, host memory and device memory and the line it prints when it works, and the verdicts
to expect there; and the verdicts per CPU family the committed runs measured. Every figure comes from the sources the
rest of the docs read: the committed runs (docs/runs/), harness/preflight/host.toml (disk, build times), the
preflight's own lines and memory rule (harness.preflight), the device-memory predictions
(harness/devices/devicememory.json) and the estimate (harness.estimate.booking). Where none measured a figure, the
block says "not measured".

    start_cpu(runs), start_gpu(runs), start_ascend(runs), cpu_families(runs), host_memory_line(runs): -> Markdown
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from harness.claims import NOT_MEASURED, TITLES
from harness.claims.paper import MODEL_NAMES
from harness.config import matrix
from harness.devices import memory as devicememory
from harness.devices.catalog import booking as device_booking
from harness.docs import accelerator as docs_accelerator
from harness.docs.facts import platform_defaults
from harness.docs.render import Run
from harness.estimate import booking
from harness.estimate import runtime as estimate
from harness.host import allocator_effect, configdiff
from harness.paths import cpu_family
from harness.preflight import NEXT, Row
from harness.preflight import data as preflight_data
from harness.preflight.host import largest_rss
from harness.preflight.render import next_step
from harness.report import explain
from harness.results.units import duration

NOT = "not measured"
HEAD = ("| step | command | time | disk | host memory | device memory | prints when it works |\n"
        "|---|---|---|---|---|---|---|")
PROFILE = "accelerator"
# The devices a one-GPU reviewer books (harness.estimate.booking.BOOKINGS) and the memory sizes they come in.
GPU_BOOKINGS = (("V100", ("V100-16", "V100-32")), ("H100", ("H100-80",)))
ASCEND_BOOKING = ("910x8", ("910-32",))


def _repo(runs: Sequence[Run]):
    return runs[0].path.parent.parent.parent


def _quick(runs: Sequence[Run]) -> Run:
    return next(r for r in runs if r.meta["platform"] == "cpu" and r.profile == "quick")


def _machine(r: Run) -> str:
    return r.host().split(", PyTorch")[0]


def _family(r: Run) -> str:
    """The run's CPU family, as runs are matched by it (harness.paths.cpu_family: "Intel Xeon", "AMD EPYC")."""
    return cpu_family((r.env.get("cpu") or {}).get("model"))


# -- the preflight's lines and figures -------------------------------------------------------------------------------
def _numbered(rows: list[str]) -> str:
    """The table: HEAD, then each row (its cells after the step's number) numbered in order."""
    return "\n".join([HEAD, *(f"| {i} {row}" for i, row in enumerate(rows, 1))])


def _check_lines(platform: str, profile: str) -> tuple[str, str]:
    """The line `--check` prints before the build and after it, as harness.preflight.render writes them."""
    command = f"./reproduce.sh {platform}"
    return (next_step([Row("build", "", "", NEXT)], command, profile), next_step([], command, profile))


def _leading_time(text: str) -> str:
    """host.toml's build time as its leading figure ("96-98 s", "353 s"), or "not measured"."""
    m = re.match(r"^(\d+(?:-\d+)? s)\b", text)
    return f"{m.group(1)} (measured)" if m else NOT


def _disk(gb: float, basis: str) -> str:
    return f"{gb:g} GB free" + (" (estimate)" if basis.lower().startswith("estimate") else " (measured)")


def _memory_rule(runs: Sequence[Run]) -> tuple[float | None, str]:
    """The preflight's host-memory rule (harness.preflight.checks_host): two processes of the largest cell of the
    quick CPU run at once. (GiB, what it is)."""
    q = _quick(runs)
    big = largest_rss(q.path)
    if big is None:
        return None, NOT
    return 2 * big["gib"], (f"{2 * big['gib']:.1f} GiB: two processes of `docs/runs/{q.name}`'s largest cell at once "
                            f"({big['gib']:.1f} GiB peak RSS)")


def _build(platform: str, mode: str) -> tuple[str, str]:
    """(time, disk) of `--build` from host.toml."""
    h = preflight_data.host()
    key = "cpu-native" if (platform, mode) == ("cpu", "native") else platform
    disk = h["disk"][platform]
    gb, basis = ((disk["native_gb"], disk["native_basis"]) if key == "cpu-native"
                 else (disk["build_gb"], disk["build_basis"]))
    return _leading_time(h["build"][key]["time"]), _disk(gb, basis)


def _run_disk(platform: str) -> str:
    d = preflight_data.host()["disk"][platform]
    return _disk(d["run_gb"], d["run_basis"])


# -- the device side: memory and time from the predictions and the estimate ------------------------------------------
def _device_memory(name: str) -> str:
    """The largest predicted peak of the accelerator profile's cells on a device, as the run plans them there."""
    have = devicememory.DEVICES[name].gib
    best = None
    for row in devicememory.rows(matrix.load().expand(PROFILE)):
        p = devicememory.by_memory(row.cells[0], have)
        if p.skip or p.need is None:
            continue
        if best is None or p.need.gib > best[0]:
            best = (p.need.gib, f"{row.model} {row.precision}" + (f", {p.label}" if p.label else ""))
    if best is None:
        return NOT
    return f"{name}: {best[0]:.1f} GiB predicted at most ({best[1]}) of {have:g} GiB"


def _estimate(runs: Sequence[Run], name: str) -> dict[str, Any]:
    """harness.estimate.booking.project of the accelerator profile on a booking of BOOKINGS, from the committed GPU
    runs (as the run itself estimates it)."""
    gpu = [r for r in runs if r.meta["platform"] == "cuda"]
    return docs_accelerator.projection(gpu[0].path.parent, PROFILE, *booking.BOOKINGS[name])


def _estimated(p: dict[str, Any]) -> str:
    return f"{duration(p['total_s'])} estimated ({duration(p['low_s'])} to {duration(p['upper_s'])})"


# -- the blocks --------------------------------------------------------------------------------------------------------
def start_cpu(runs: Sequence[Run]) -> str:
    """A laptop CPU: check, build, check, the quick run, the target run; then the verdicts per CPU family."""
    q = _quick(runs)
    t = next(r for r in runs if r.meta["platform"] == "cpu" and r.profile == "target")
    before, after = _check_lines("cpu", platform_defaults(_repo(runs))["cpu"])
    build_time, build_disk = _build("cpu", "native")
    _, host = _memory_rule(runs)
    run_disk = _run_disk("cpu")
    rows = [f"| `./reproduce.sh cpu --check` | {NOT} | none | none | none | `{before}` |",
            f"| `./reproduce.sh cpu --build` | {build_time} | {build_disk} | {NOT} | none | "
            f"`reproduce.sh: built .venv in ...` |",
            f"| `./reproduce.sh cpu --check` | {NOT} | none | {NOT} | none | `{after}` |",
            f"| `{q.command()}` | {q.wall()} | {run_disk} | {host} | none | "
            f"`done: {q.statuses()}; results in DIR` (the ok count varies: A.5), then "
            f"`report: DIR/report/report.html` |",
            f"| `{t.command()}` (optional) | {t.wall()} | {run_disk} | {host} | none | "
            f"`done: {t.statuses()}; results in DIR` |"]
    fams = _families(runs)
    verdicts = []
    for family, group in fams.items():
        whole = [r for r in group if not _partial(r)] or group   # a family's whole quick run, where one is committed
        claims = _verdicts(whole)
        measured = [f"{c} {v}" for c, v in claims.items() if v != NOT_MEASURED]
        rest = [c for c, v in claims.items() if v == NOT_MEASURED]
        took = f", {whole[0].wall()}" if whole[0] is not q and not _partial(whole[0]) else ""
        verdicts.append(f"on {family} ({_runs_named(whole)}" + (", each" if len(whole) > 1 else "") + took
                        + f"): {', '.join(measured)}" + (f"; {', '.join(rest)} {NOT} there" if rest else ""))
    return (f"**A laptop or other Linux x86_64 CPU.** Times measured on {_machine(q)}, data from a local copy (no "
            f"download in them). Verdicts to expect, by the CPU that measured them: " + "; ".join(verdicts)
            + f". A host is compared with the run of its nearest CPU (the same family, else the same vendor; "
            f"`--check` and the report's banner name it); another CPU's verdicts: {NOT}; A.7 says what changed "
            f"between these.\n\n" + _numbered(rows))


def _gpu_rows(runs: Sequence[Run], platform: str, estimates: list[tuple[str, dict[str, Any]]],
              memories: list[str], host: str) -> list[str]:
    before, after = _check_lines(platform, platform_defaults(_repo(runs))[platform])
    build_time, build_disk = _build(platform, "container")
    p = estimates[0][1]
    skipped = p["skipped"]
    times = "; ".join(f"{name}: {_estimated(e)}" for name, e in estimates)
    counts = {name: f"{e['runs'] - e['skipped']:,}" for name, e in estimates}
    planned = (f"{next(iter(counts.values()))} runs planned" if len(set(counts.values())) == 1 else
               "; ".join(f"{name}: {n} runs planned" for name, n in counts.items()))
    return [f"| `./reproduce.sh {platform} --check` | {NOT} | none | none | none | `{before}` |",
            f"| `./reproduce.sh {platform} --build` | {build_time}, plus the download | {build_disk} | {NOT} "
            f"| none | `reproduce.sh: built ...` |",
            f"| `./reproduce.sh {platform} --check` | {NOT} | none | {NOT} | {NOT} | `{after}` |",
            f"| `./reproduce.sh {platform} --hours H` (H: the hours booked; without it, the whole profile) | {times}; "
            f"with `--hours`, at most H (A.5b: what 8 and 24 hours decide) | {_run_disk(platform)} | {host} | "
            f"{'; '.join(memories)} | `planned for H h ...` before the first cell (what runs, what each claim "
            f"loses), then `done: N ok, M skipped; results in DIR` (N {NOT}; {planned}, {skipped} of them skipped "
            f"there), then `report: DIR/report/report.html` |"]


def start_gpu(runs: Sequence[Run]) -> str:
    """One GPU (a V100 or an H100): check, build, check, the accelerator profile."""
    estimates = [(name, _estimate(runs, name)) for name, _ in GPU_BOOKINGS]
    memories = [_device_memory(d) for _, sizes in GPU_BOOKINGS for d in sizes]
    _, host = _memory_rule(runs)
    rows = _gpu_rows(runs, "cuda", estimates, memories, f"{host}; a GPU host's own {NOT}")
    p = estimates[0][1]
    multi = sum(1 for d in p["decisions"].values() if d.verdict and d.cell.devices_per_node > 1)
    return (f"**One GPU (a V100 or an H100), one booking.** The run's times are estimates from the committed PyTorch "
            f"runs on one {estimate.reference_device(_gpu_path(runs))} (A.5b says what they rest on). Verdicts to "
            f"expect: {NOT}, since no run of both frameworks on a GPU exists; C5 needs several GPUs (one GPU skips its "
            f"{multi} cells of 2, 4 and 8 devices); A.5b's last table says what the PyTorch-only measurements give per "
            f"claim.\n\n" + _numbered(rows))


def _gpu_path(runs: Sequence[Run]):
    return next(r for r in runs if r.meta["platform"] == "cuda").path


def start_ascend(runs: Sequence[Run]) -> str:
    """An Ascend 910 server: the driver, check, build, check, the accelerator profile on 8 NPUs."""
    name, sizes = ASCEND_BOOKING
    estimates = [(f"{device_booking(sizes[0], 8)[2]} NPUs", _estimate(runs, name))]
    _, host = _memory_rule(runs)
    rows = _gpu_rows(runs, "ascend", estimates, [_device_memory(d) for d in sizes], f"{host}; an NPU host's own {NOT}")
    rows.insert(0, f"| `npu-smi info` | {NOT} | none | none | none | the chips and the driver's version (A.3) |")
    return (f"**An Ascend 910 server, 8 NPUs, one booking.** Nothing has run on an NPU: the build's time and the "
            f"checks' lines there are {NOT}, the run's time an estimate scaled from one "
            f"{estimate.reference_device(_gpu_path(runs))} by datasheet ratios (A.5b). Verdicts to expect: the "
            f"paper's, each claim *supported*; a claim is reproduced when the run says so (A.7).\n\n" + _numbered(rows))


# -- CPU families ------------------------------------------------------------------------------------------------------
def _families(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """The quick-profile CPU runs by CPU family, the reference run's family first and in each family the whole runs
    before those that took only some cells (`--only`)."""
    out: dict[str, list[Run]] = {}
    for r in sorted((r for r in runs if r.meta["platform"] == "cpu" and r.profile == "quick"),
                    key=lambda r: (r.name != "cpu-quick", _partial(r))):
        out.setdefault(_family(r), []).append(r)
    return out


def _partial(r: Run) -> bool:
    """Whether the run took only some of the profile's cells (an invocation with --only)."""
    return any(i.get("only") for i in r.meta.get("invocations") or [] if isinstance(i, dict))


_CLAIMS: dict[int, tuple[Run, dict[str, str]]] = {}   # id(run) -> (the run, kept alive; its verdicts), evaluated once


def _run_verdicts(r: Run) -> dict[str, str]:
    got = _CLAIMS.get(id(r))
    if got is None or got[0] is not r:
        got = _CLAIMS[id(r)] = (r, {c.id: c.verdict for c in r.claims()})
    return got[1]


def _verdicts(group: Sequence[Run]) -> dict[str, str]:
    """Each claim's verdict over the runs: one word where they all agree, else each with its count."""
    got: dict[str, list[str]] = {}
    for r in group:
        for cid, verdict in _run_verdicts(r).items():
            got.setdefault(cid, []).append(verdict)
    out = {}
    for cid in TITLES:
        vs = got.get(cid, [NOT_MEASURED])
        counts = {v: vs.count(v) for v in dict.fromkeys(vs)}
        out[cid] = vs[0] if len(counts) == 1 else ", ".join(f"{v} in {n} run{'s' * (n > 1)}" for v, n in counts.items())
    return out


def _runs_named(group: Sequence[Run]) -> str:
    names = [r.path.relative_to(r.path.parent.parent).as_posix() if r.path.parent.name != "runs" else r.name
             for r in group]
    return ", ".join(f"`{n}`" for n in names) if len(names) <= 3 else f"{len(names)} runs under `docs/runs/allocator/`"


def _allocator(r: Run) -> str:
    """Each framework's allocator as env.json recorded it: its model cells', and its operator cells' where other."""
    a = configdiff.allocators(r.env)
    out = []
    for fw, name in (("pytorch", "PyTorch"), ("mindspore", "MindSpore")):
        model, op = a.get((fw, "model"), "?"), a.get((fw, "operator"))
        out.append(f"{name} {model}" + (f" (its operator cells {op})" if op and op != model else ""))
    return ", ".join(out)


def _span(xs: Sequence[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def _moved_most(fams: dict[str, list[Run]]) -> str | None:
    """The model whose C1 throughput ratio differs most between the CPU families' medians (their largest over their
    smallest): the one the table shows."""
    by: dict[str, list[float]] = {}
    for group in fams.values():
        sums = [allocator_effect.summarise_run(r.path) for r in group]
        for model in {m for s in sums for m in s["c1"]}:
            vals = sorted(s["c1"][model]["ratio"] for s in sums if model in s["c1"])
            by.setdefault(model, []).append(vals[len(vals) // 2])
    spread = {m: max(v) / min(v) for m, v in by.items() if len(v) > 1 and min(v) > 0}
    return max(spread, key=spread.get) if spread else None


def cpu_families(runs: Sequence[Run]) -> str:
    """Per CPU model and allocator configuration the committed quick-profile runs used: each claim's verdict, C1's
    throughput ratio of the model it moves most between the CPUs, and how many of Figure 5's ratios fall outside the
    expected run's intervals."""
    fams = _families(runs)
    ref_run = fams[next(iter(fams))][0]
    ref = allocator_effect.summarise_run(ref_run.path)
    model = _moved_most(fams)
    name = MODEL_NAMES.get(model, model or "?")
    rows = ["| CPU | runs | allocators | " + " | ".join(TITLES) + f" | C1: {name} MindSpore / PyTorch throughput "
            f"| Figure 5 ratios outside `{ref_run.name}`'s intervals |",
            "|---|---|---|" + "---|" * len(TITLES) + "---|---|"]
    ratio_by: dict[str, list[float]] = {}
    o1_by: dict[str, str] = {}
    moved: dict[str, bool] = {}   # per family: whether its runs reached different verdicts on a claim both measured
    for family, group in fams.items():
        by: dict[tuple[str, bool], list[Run]] = {}
        for r in group:
            by.setdefault((_allocator(r), _partial(r)), []).append(r)
        o1 = _verdicts(group)["O1"]
        o1_by[family] = o1 + (f" in all {len(group)} runs" if len(group) > 1 and " in " not in o1 else "")
        seen: dict[str, set[str]] = {}
        for r in group:
            for cid, v in _run_verdicts(r).items():
                seen.setdefault(cid, set()).add(v)
        moved[family] = any(len(vs - {NOT_MEASURED}) > 1 for vs in seen.values())
        for (alloc, partial), rs in by.items():
            sums = [allocator_effect.summarise_run(r.path) for r in rs]
            ratios = [s["c1"][model]["ratio"] for s in sums if model in s["c1"]]
            ratio_by.setdefault(family, []).extend(ratios)
            verdicts = _verdicts(rs)
            out = ("—" if rs[0] is ref_run else
                   f"{_span([len(configdiff.outside(s, ref)) for s in sums]).replace('.00', '')} of "
                   f"{len(sums[0]['operators'])}")
            rows.append(f"| {family} ({(rs[0].env.get('cpu') or {}).get('cores', '?')} cores) | {_runs_named(rs)}"
                        + (" (C1's and Figure 5's cells only)" if partial else "")
                        + f" | {alloc} | " + " | ".join(verdicts.values())
                        + f" | {_span(ratios) if ratios else NOT} | {out} |")
    others = [f for f in fams if f != _family(ref_run)]
    ref_ratio = ratio_by.get(_family(ref_run)) or []
    text = "\n".join(rows)
    if others and ref_ratio:
        o = others[0]
        whole = next((r for r in fams[o] if not _partial(r)), None)
        text += (f"\n\nOn {o}, O1 read {o1_by[o]} (on {_family(ref_run)}: {o1_by[_family(ref_run)]}) and C1's {name} "
                 f"ratio was {_span(ratio_by[o])} against {_span(ref_ratio)}; "
                 + ("its runs' verdicts differ from run to run" if moved[o] else
                    "every run there reached the same verdict on each claim it measured")
                 + ". So on another CPU expect the ratios to move, and a verdict near the tie band to change"
                 + (f"; a run on {o} is compared with `{whole.name}`, the expected results there (`--check` and the "
                    f"report's banner name the run of the nearest CPU)" if whole else "") + ".")
        first = whole or fams[o][0]
        why = explain.versus(name, _profiles(first, model), _profiles(ref_run, model),
                             f"`{ref_run.name}` ({_family(ref_run)})", at=(f"in `{first.name}`", "there"))
        if why:   # the sentence a report of that run gives under its "Why"
            text += f" Why, from both frameworks' profiled steps: {why}"
    return text


def _profiles(run: Run, model: str | None) -> dict[tuple[str, str], dict]:
    """A run's profiled passes of one model's fp32 cells, by (framework, mode)."""
    return {(r["framework"], r["mode"]): r["profile"] for r in run.results
            if r.get("model") == model and r.get("kind") == "model" and r.get("amp") == "off"
            and (r.get("profile") or {}).get("per_step_s")}


def host_memory_line(runs: Sequence[Run]) -> str:
    """README's line: the host memory a run needs, by the preflight's rule, from the quick run's peaks."""
    need, what = _memory_rule(runs)
    q = _quick(runs)
    if need is None:
        return f"Host memory: {NOT}."
    return (f"Host memory: at least {what}, measured on {_machine(q)}; `--check` compares the host's with it. "
            f"On a GPU or NPU host the host side's own peak is {NOT}.")
