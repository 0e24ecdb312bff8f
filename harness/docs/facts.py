"""The docs' rendered blocks of facts that several pages state, so that each is stated from one source
(harness.docs.blocks declares where each goes): what ran where (the committed run folders and the GPU measurements
beside them in docs/at-best), the profiles and their defaults (harness/config/matrix.toml, and reproduce.sh for each
platform's default profile), and the `done:` line a reviewer's run may end with.

    where_ran(runs), where_ran_line(runs), profiles(runs), done_range(runs): (runs) -> Markdown
    at_best_gpu(runs) -> the GPU measurements of docs/at-best: [(device, date, kind, file, data)]
    platform_defaults(repo) -> {platform: profile}, read from reproduce.sh
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config import matrix
from harness.config.cell import PLATFORMS
from harness.docs.render import Run
from harness.errors import HarnessError
from harness.launch import sequential
from harness.paths import RUNS
from harness.results.units import duration

AT_BEST = "at-best"   # docs/at-best, beside docs/runs
# reference_gap-h200-2026-11-26.json: the final figures of a device and day; a file with more in its name
# (reference_gap-h200-first-..., why_device-h100-annotations-counted-...) is a superseded or flawed attempt, kept for
# the methodology pages but not evidence here.
GPU_FILE = re.compile(r"^(reference_gap|why_device)-(h\d{3})-(\d{4}-\d{2}-\d{2})\.json$")
KINDS = {"reference_gap": "harness against PyTorch's reference loop at the accelerator profile's sizes",
         "why_device": "the device's busy time in a profiled step at batch 128"}
SHORT = {"reference_gap": "reference gap", "why_device": "busy time"}
DEFAULT_LINE = re.compile(r'if \[ "\$platform" = (\w+) \]; then profile=(\w+); else profile=(\w+); fi')


def platform_defaults(repo: Path) -> dict[str, str]:
    """Each platform's default profile, as reproduce.sh picks it (its one `profile=` line for a run without one)."""
    m = DEFAULT_LINE.search((repo / "reproduce.sh").read_text())
    if not m:
        raise ValueError("reproduce.sh: no line `if [ \"$platform\" = cpu ]; then profile=...; else profile=...; fi`")
    return {p: m.group(2) if p == m.group(1) else m.group(3) for p in PLATFORMS}


def _docs_dir(runs: Sequence[Run]) -> Path:
    return runs[0].path.parent.parent


def at_best_gpu(runs: Sequence[Run]) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """The GPU measurements of docs/at-best (reference_gap-h200-*.json, why_device-h100-*.json, ...): the device
    named by the file (its full name where a why_device file recorded it), the date, the kind, the file and its data."""
    folder = _docs_dir(runs) / AT_BEST
    found = []
    for path in sorted(folder.glob("*.json")):
        m = GPU_FILE.match(path.name)
        if m:
            found.append((m.group(2).upper(), m.group(3), m.group(1), f"docs/{AT_BEST}/{path.name}",
                          json.loads(path.read_text())))
    names = {short: d["device"] for short, _, kind, _, d in found if kind == "why_device" and d.get("device")}
    return [(names.get(short, f"NVIDIA {short}"), date, kind, name, d) for short, date, kind, name, d in found]


def _machine(r: Run) -> str:
    return r.host().split(", PyTorch")[0].split(", MindSpore")[0]


def _gpus(r: Run) -> str:
    gpus = [g.get("name") for g in (r.env.get("nvidia") or {}).get("gpus") or [] if g.get("name")]
    return ", ".join(f"{gpus.count(g)} x {g}" if gpus.count(g) > 1 else f"one {g}" for g in dict.fromkeys(gpus))


def _frameworks(r: Run) -> list[str]:
    return sorted({res.get("framework") for res in r.results if res.get("status") == "ok" and res.get("framework")})


def _versions(r: Run) -> str:
    packages = r.env.get("packages") or {}
    torch = ((r.env.get("frameworks") or {}).get("torch") or {}).get("torch") or packages.get("torch")
    out = [f"PyTorch {torch}"] if torch and "pytorch" in _frameworks(r) else []
    out += [f"MindSpore {packages['mindspore']}"] if packages.get("mindspore") and "mindspore" in _frameworks(r) else []
    driver = (r.env.get("nvidia") or {}).get("driver")
    return ", ".join(out + ([f"driver {driver}"] if driver else []))


def _how(r: Run) -> str:
    image = (r.env.get("container") or {}).get("image")
    return f"in the image {image}" if image else "natively"


def where_ran(runs: Sequence[Run]) -> str:
    """One row per platform and kind of evidence: the committed runs (host, dates, versions), the GPU measurements of
    docs/at-best, and, in one row, what has no committed evidence at all."""
    rows = ["| platform | what ran | on, when | versions |", "|---|---|---|---|"]
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        key = (r.meta["platform"], _machine(r) if r.meta["platform"] == "cpu" else _gpus(r), _versions(r), _how(r))
        groups.setdefault(key, []).append(r)
    for (platform, where, versions, how), rs in groups.items():
        fws = sorted({fw for r in rs for fw in _frameworks(r)})
        what = (f"{' and '.join(fw.replace('pytorch', 'PyTorch').replace('mindspore', 'MindSpore') for fw in fws)} "
                f"{how}: " + ", ".join(f"`{r.name}` ({r.profile})" for r in rs) + " (`docs/runs/`)")
        rows.append(f"| {platform} | {what} | {where}, {' and '.join(sorted({r.date() for r in rs}))} | {versions} |")
    measured: dict[str, dict[str, set[str]]] = {}
    kinds, versions = set(), set()
    for device, date, kind, _, d in at_best_gpu(runs):
        measured.setdefault(device, {}).setdefault(kind, set()).add(date)
        kinds.add(kind)
        versions.add(d.get("torch") or next((r.env["frameworks"]["torch"]["torch"] for r in runs
                                             if r.meta["platform"] == "cuda"), ""))
    if measured:
        what = "; ".join(f"{KINDS[k]} (`{k}-*.json`)" for k in sorted(kinds))
        where = "; ".join(f"one {device}, " + ", ".join(f"{' and '.join(sorted(dates))} ({SHORT[k]})"
                                                       for k, dates in sorted(by.items()))
                          for device, by in sorted(measured.items()))
        rows.append(f"| cuda | PyTorch natively: {what} (`docs/at-best/`) | {where} | "
                    f"PyTorch {', '.join(sorted(versions))} |")
    missing = never(runs)
    if missing:
        rows.append(f"| {', '.join(dict.fromkeys(p for p, _ in missing))} | **never run**: "
                    f"{'; '.join(w for _, w in missing)} | | |")
    return "\n".join(rows)


def never(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """What no committed run holds: MindSpore on a GPU, the CUDA image on a GPU, anything on an NPU, an accelerator
    profile run."""
    cuda = [r for r in runs if r.meta["platform"] == "cuda"]
    out = []
    if not any("mindspore" in _frameworks(r) for r in cuda):
        out.append(("cuda", "MindSpore on a GPU"))
    if not any((r.env.get("container") or {}).get("image") for r in cuda):
        out.append(("cuda", "the CUDA image on a GPU (built and checked in CI without one)"))
    if not any(r.profile == "accelerator" for r in runs):
        out.append(("cuda", "the accelerator profile"))
    if not any(r.meta["platform"] == "ascend" for r in runs):
        out.append(("ascend", "anything on an Ascend NPU (the Ascend image was never built)"))
    return out


def where_ran_line(runs: Sequence[Run]) -> str:
    """The same facts in one sentence, for the README's opening."""
    cpu = [r for r in runs if r.meta["platform"] == "cpu"]
    gpus = sorted({device for device, *_ in at_best_gpu(runs)} | {_gpus(r).removeprefix("one ")
                                                                  for r in runs if r.meta["platform"] == "cuda"})
    missing = "; ".join(what for _, what in never(runs))
    return (f"What ran: both frameworks on {', '.join(sorted({_machine(r) for r in cpu}))} (the committed CPU runs); "
            f"PyTorch alone, natively, on one {' and one '.join(gpus)}. Never run: {missing}.")


def _sized_for(description: str) -> str:
    return description.split(":")[0]


def profiles(runs: Sequence[Run]) -> str:
    """Every profile of harness/config/matrix.toml: which platform runs it by default (reproduce.sh), what it is for,
    its repeats, and its cells and planned runs on a host of 1 and of 8 devices."""
    m = matrix.load()
    defaults = platform_defaults(_docs_dir(runs).parent)
    rows = ["| profile | default of | for | repeats: a cell / a cell a claim compares / the cap "
            "| cells (planned runs), 1 device | 8 devices |", "|---|---|---|---|---|---|"]
    for name in m.profiles:
        prof = m.profile(name)
        cells = m.expand(name)
        counts = [(len(cs), sum(c.repeats for c in cs))
                  for cs in ([c for c in cells if c.devices_per_node <= d] for d in (1, 8))]
        of = ", ".join(f"`./reproduce.sh {p}`" for p, d in defaults.items() if d == name) or f"`--{name}`"
        reps = f"{prof.get('repeats', 1)} / {prof.get('claim_repeats', prof.get('repeats', 1))} / {m.max_repeats(name)}"
        rows.append(f"| {name} | {of} | {_sized_for(prof.get('description', ''))} | {reps} | "
                    f"{counts[0][0]:,} ({counts[0][1]:,}) | {counts[1][0]:,} ({counts[1][1]:,}) |")
    return "\n".join(rows) + ("\n\nA CPU host runs the 1- and 2-process cells (more processes than sockets measure "
                              "contention, not scaling). `--repeats N` sets the least repeats of every cell, "
                              "`--max-repeats M` the cap; `python -m harness list --profile P --platform P` lists "
                              "the cells.")


def done_range(runs: Sequence[Run]) -> str:
    """The `done:` line a run of the same profile on another host may end with: the runs it plans, those its host
    skips by rule, and the range the sequential repeats may add (each comparison not yet settled up to max_repeats;
    each operator configuration at least OPERATOR_MIN_REPEATS processes a side, up to operator_max_repeats)."""
    (r,) = runs
    m = matrix.load()
    cells = {c.id: c for c in m.expand(r.profile)}
    ran = {res["cell"] for res in r.results}
    skipped = {res["cell"] for res in r.results if res.get("status") == "skipped"}
    cap = m.max_repeats(r.profile)
    op_cap = m.operator_max_repeats(r.profile, cap)
    low = high = 0
    for cid in ran - skipped:
        c = cells.get(cid)
        if c is None:
            continue
        if c.kind == "operator":
            low += max(c.repeats, sequential.OPERATOR_MIN_REPEATS)
            high += max(c.repeats, op_cap)
        else:
            low += c.repeats
            high += max(c.repeats, cap) if matrix.compared(c) else c.repeats
    n_skipped = sum(cells[c].repeats for c in skipped if c in cells)
    ok = sum(res.get("status") == "ok" for res in r.results)
    budget = m.operator_budget_s(r.profile)
    return (f"The runs a host plans and skips are fixed ({n_skipped} skipped by the profile's rules); the sequential "
            f"repeats are not: a comparison not yet settled gets more"
            + (f", and each operator configuration {sequential.OPERATOR_MIN_REPEATS} to {op_cap} processes a side "
               f"while its interval is wider than ±{sequential.OPERATOR_PRECISION:.0%}"
               + (f", within {budget:.0f} s of operator time" if budget else "") if op_cap > cap else "")
            + f". So expect `done: N ok, {n_skipped} skipped` with N from {low} to {high}; the committed run had "
            f"{ok}.")


# README's test command as it last ran whole and was committed (tools/test.sh writes the record, tools/test_summary.py;
# docs/runs/fresh-host/ keeps it beside the transcripts of the pristine hosts' walks it ran).
FRESH_HOST = RUNS / "fresh-host"


def test_command(runs: Sequence[Run], folder: Path = FRESH_HOST) -> str:
    """How long README's test command took, on what, under which Python, and the disk it needed, from the committed
    record (docs/runs/fresh-host/test-command.json)."""
    path = folder / "test-command.json"
    try:
        r = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise HarnessError(f"docs/runs/fresh-host/{path.name}: cannot read the test command's record ({e}); run "
                           f"tools/test.sh from a plain clone and copy its .tox/logs/test-command.json there") from None
    host = r["host"]
    envs = ", ".join(f"{e['name']} {duration(e['wall_s'])}" for e in r["envs"])
    if r.get("lanes", 1) == 2:   # lint and test beside main, image and image-cuda: each time its own, overlapping
        envs = f"in two lanes at once, lint and test beside main, image and image-cuda: {envs}"
    elif r.get("lanes", 1) == 3:   # lint and test beside main and image, and beside image-cuda
        envs = f"in three lanes at once, lint and test beside main and image, and beside image-cuda: {envs}"
    failed = [e["name"] for e in r["envs"] if e["status"] != "OK"]
    where = "from a plain clone with nothing beside it" if r.get("plain_clone") else "beside a ../shared folder"
    # tools/test.sh reads the same record and refuses, in one line, to start the whole set with less free than this
    disk = (f"; it needed {r['disk_used_gib']:.1f} GiB of free disk at its peak, and with less free it says so and "
            "does not start" if r.get("disk_used_gib") is not None else "")
    return (f"On {host['cpu']} ({host['cores']} cores, {host['memory_gib']} GiB), as root on Debian 12, {where}, "
            f"`tools/test.sh` took {duration(r['wall_s'])} ({envs})"
            + (f", and failed in {', '.join(failed)}" if failed else ", every environment passing")
            + f"{disk} ({r['date']}). The suite runs under Debian's `python3.11` ({r['python']['version']}), which the "
            f"script installs with `apt-get`.")
