"""ARTIFACT.md's start blocks and its table of verdicts per CPU family (harness.docs.start), rendered from the committed
runs: each figure is checked against its source read another way (the run folders' files, host.toml, the preflight's
own lines, the estimate), so a block that drifted from its source, or lost a step, fails here."""

import json

import pytest

from harness.claims import TITLES, evaluate
from harness.docs import blocks as docs
from harness.docs import start
from harness.docs.render import Run
from harness.estimate import booking
from harness.paths import cpu_family
from harness.preflight import NEXT, Row
from harness.preflight import data as preflight_data
from harness.preflight.render import next_step
from harness.results.units import duration
from tests.helpers import REPO

NAMES = ("start-cpu", "start-gpu", "start-ascend", "cpu-families", "host-memory")
RUNS = REPO / docs.RUNS_DIR


@pytest.fixture(scope="module")
def rendered():
    """Each of the blocks' Markdown, from the committed runs."""
    chosen = [b for b in docs.BLOCKS if b.name in NAMES]
    missing = [m for b in chosen for m in docs.missing_runs(REPO, b)]
    if missing:
        pytest.skip(f"run folders not committed: {', '.join(missing)}")
    runs = docs.load_runs(REPO, chosen)
    return {b.name: docs.content(b, runs) for b in chosen}


def _rows(text: str) -> list[list[str]]:
    """The numbered table's rows, cells stripped (header and rule left out)."""
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in text.splitlines() if line.startswith("| ")]
    return [r for r in rows if r[0].isdigit()]


def _env(run: str) -> dict:
    return json.loads((RUNS / run / "env.json").read_text())


def _results(run: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((RUNS / run / "cells").glob("**/r*.json"))
            if p.name[1:-5].isdigit()]


def test_every_block_is_declared_in_artifact_or_readme():
    files = {b.name: b.file for b in docs.BLOCKS if b.name in NAMES}
    assert files == {"start-cpu": "ARTIFACT.md", "start-gpu": "ARTIFACT.md", "start-ascend": "ARTIFACT.md",
                     "cpu-families": "ARTIFACT.md", "host-memory": "README.md"}
    text = (REPO / "ARTIFACT.md").read_text()
    # the start blocks come first, before the terms and A.1
    assert text.index("<!-- rendered:start-cpu -->") < text.index("<!-- rendered:start-gpu -->") \
        < text.index("<!-- rendered:start-ascend -->") < text.index("## A.1 ")
    assert text.index("## A.7 ") < text.index("<!-- rendered:cpu-families -->") < text.index("## A.8 ")


@pytest.mark.parametrize("platform,name", [("cpu", "start-cpu"), ("cuda", "start-gpu"), ("ascend", "start-ascend")])
def test_the_steps_in_order_with_the_lines_the_preflight_prints(rendered, platform, name):
    rows = _rows(rendered[name])
    assert [r[0] for r in rows] == [str(i) for i in range(1, len(rows) + 1)]
    commands = [r[1].split("`")[1] for r in rows]
    first = commands.index(f"./reproduce.sh {platform} --check")
    assert commands[first:first + 3] == [f"./reproduce.sh {platform} --check", f"./reproduce.sh {platform} --build",
                                         f"./reproduce.sh {platform} --check"]
    profile = "quick" if platform == "cpu" else "accelerator"
    command = f"./reproduce.sh {platform}"
    assert rows[first][6] == f"`{next_step([Row('x', '', '', NEXT)], command, profile)}`"
    assert rows[first + 2][6] == f"`{next_step([], command, profile)}`"
    assert all(len(r) == 7 for r in rows)   # time, disk, host memory, device memory and the line: every step has each
    run = rows[first + 3]
    assert run[1].startswith(f"`{command}") and "`done: " in run[6] and "report: DIR/report/report.html" in run[6]
    if platform == "ascend":
        assert commands[0] == "npu-smi info"   # the driver before anything


def test_cpu_block_is_the_committed_runs(rendered):
    text = rendered["start-cpu"]
    rows = _rows(text)
    quick, target = rows[3], rows[4]
    assert quick[1] == f"`{Run.load(RUNS / docs.QUICK).command()}`"
    assert target[1] == f"`{Run.load(RUNS / docs.TARGET).command()}` (optional)"
    results = _results(docs.QUICK)
    ok = sum(r["status"] == "ok" for r in results)
    skipped = sum(r["status"] == "skipped" for r in results)
    assert f"`done: {ok} ok, {skipped} skipped; results in DIR`" in quick[6]
    assert f"`done: {sum(r['status'] == 'ok' for r in _results(docs.TARGET))} ok; results in DIR`" in target[6]
    # the expected run's CPU family is named, and each family's verdicts, from its whole quick run where one is
    # committed (the Intel Xeon's), with its time
    first = text.split("\n")[0]
    assert f"on {cpu_family(_env(docs.QUICK)['cpu']['model'])} (`{docs.QUICK}`)" in first
    xeon = {c.id: c.verdict for c in evaluate(_results(docs.QUICK_INTEL), platform="cpu", profile="quick")}
    assert (f"on {cpu_family(_env(docs.QUICK_INTEL)['cpu']['model'])} (`{docs.QUICK_INTEL}`, "
            f"{Run.load(RUNS / docs.QUICK_INTEL).wall()}): " + ", ".join(f"{c} {v}" for c, v in xeon.items())) in first
    assert "allocator/" not in first   # the partial runs are the families table's, not the start block's
    # the build's time and disk are host.toml's
    host = preflight_data.host()
    assert host["build"]["cpu-native"]["time"].split(",")[0] in rows[1][2]
    assert f"{host['disk']['cpu']['native_gb']:g} GB free" in rows[1][3]


def test_host_memory_is_the_preflights_rule_on_the_committed_peaks(rendered):
    peak = max(r["peak_rss_mb"] for r in _results(docs.QUICK) if isinstance(r.get("peak_rss_mb"), (int, float)))
    need = f"{2 * peak / 1024:.1f} GiB"
    assert need in rendered["host-memory"]
    assert need in _rows(rendered["start-cpu"])[3][4]
    for name in ("start-gpu", "start-ascend"):
        run = _rows(rendered[name])[-1]
        assert need in run[4] and "not measured" in run[4]   # a device host's own peak was never measured


def test_unmeasured_figures_say_so(rendered):
    ascend = _rows(rendered["start-ascend"])
    build = next(r for r in ascend if "--build" in r[1])
    assert build[2].startswith("not measured") and "(estimate)" in build[3]   # the Ascend image was never built
    assert "(measured)" in next(r for r in _rows(rendered["start-gpu"]) if "--build" in r[1])[3]
    for name in ("start-cpu", "start-gpu", "start-ascend"):
        checks = [r for r in _rows(rendered[name]) if r[1].endswith("--check`")]
        assert all(r[2] == "not measured" for r in checks)   # no committed record times the preflight


def test_gpu_and_ascend_times_are_the_estimate(rendered):
    from harness.config import matrix
    from harness.devices import memory as devicememory
    from harness.estimate import runtime as estimate

    for name, block in (("V100", "start-gpu"), ("H100", "start-gpu"), ("910x8", "start-ascend")):
        platform, device, devices = booking.BOOKINGS[name]
        folders, _ = estimate.references(platform, "accelerator", RUNS)
        p = booking.project(matrix.load(), "accelerator", platform, run=folders, device=device, devices=devices,
                            memory=devicememory.table_gib(device))
        assert f"{duration(p['total_s'])} estimated ({duration(p['low_s'])} to {duration(p['upper_s'])})" \
            in rendered[block], name
        assert f"{p['skipped']} of them skipped there" in rendered[block]


def test_no_block_promises_a_day():
    text = (REPO / "ARTIFACT.md").read_text()
    for name in ("start-gpu", "start-ascend"):
        a, b = text.index(f"<!-- rendered:{name} -->"), text.index(f"<!-- /rendered:{name} -->")
        assert "one booking" in text[a:b] and "a day" not in text[a:b]


def test_cpu_families_are_what_the_runs_give(rendered):
    text = rendered["cpu-families"]
    allocator = sorted(p.name for p in (RUNS / "allocator").glob("*/run.json") for p in [p.parent])
    verdicts = {}
    for run in [docs.QUICK, *(f"allocator/{a}" for a in allocator)]:
        meta = json.loads((RUNS / run / "run.json").read_text())
        verdicts[run] = {c.id: c.verdict for c in evaluate(_results(run), platform="cpu", profile=meta["profile"])}
    lines = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| ") and "`" in line}
    epyc = next(line for names, line in lines.items() if names == f"`{docs.QUICK}`")
    assert epyc.startswith(f"| {cpu_family(_env(docs.QUICK)['cpu']['model'])} ")
    assert f"| {verdicts[docs.QUICK]['O1']} |" in epyc
    # the Intel Xeon's whole quick run: a row of its own, every claim measured, before its partial runs
    whole = lines[f"`{docs.QUICK_INTEL}`"]
    mine = {c.id: c.verdict for c in evaluate(_results(docs.QUICK_INTEL), platform="cpu", profile="quick")}
    assert whole.startswith("| Intel Xeon (2 cores) |") and " | ".join(mine.values()) in whole
    assert list(lines).index(f"`{docs.QUICK_INTEL}`") < min(i for i, n in enumerate(lines) if "allocator/" in n)
    xeon = [line for names, line in lines.items() if "allocator/" in names]
    assert all(line.split(" | ")[1].endswith(" (C1's and Figure 5's cells only)") for line in xeon)
    words = {w for line in xeon for w in line.replace(",", " ").split()}
    assert len(xeon) == 2 and {"tcmalloc", "glibc-tuned"} <= words
    named = sorted(n.strip("`") for line in xeon
                   for n in line.split(" | ")[1].removesuffix(" (C1's and Figure 5's cells only)").split(", "))
    assert named == sorted(f"allocator/{a}" for a in allocator)   # every committed run, each once
    column = 3 + list(TITLES).index("O1")   # CPU, runs, allocators, then the claims
    for line in xeon:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        got = {verdicts[n.strip("`")]["O1"] for n in cells[1].split(" (")[0].split(", ")}
        assert len(got) > 1 or cells[column] == got.pop(), line
    # C1's GRU ratio, MindSpore over PyTorch throughput, as the allocator summary gives it
    from harness.host import allocator_effect

    gru = [allocator_effect.summarise_run(RUNS / "allocator" / a)["c1"]["gru"]["ratio"] for a in allocator]
    intel = allocator_effect.summarise_run(RUNS / docs.QUICK_INTEL)["c1"]["gru"]["ratio"]
    assert f"| {intel:.2f} |" in whole
    assert f"{min(gru + [intel]):.2f}-{max(gru + [intel]):.2f}" in text   # the family's span, in the prose
    assert f"compared with `{docs.QUICK_INTEL}`, the expected results there" in text
    assert f"{allocator_effect.summarise_run(RUNS / docs.QUICK)['c1']['gru']['ratio']:.2f}" in epyc


def test_a_run_on_another_cpu_gets_its_own_row(tmp_path):
    """The families come from each run's env.json: an allocator run recorded on another CPU is a row of its own."""
    for run in (docs.QUICK, "allocator/tcmalloc-1", "allocator/tcmalloc-2"):
        (tmp_path / run).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / run).symlink_to(RUNS / run)
    runs = [Run.load(tmp_path / r) for r in (docs.QUICK, "allocator/tcmalloc-1", "allocator/tcmalloc-2")]
    runs[2].env = {**runs[2].env, "cpu": {**runs[2].env["cpu"], "model": "Some Other CPU"}}
    text = start.cpu_families(runs)
    only = " (C1's and Figure 5's cells only) |"   # both took --only
    assert f"| Some Other (2 cores) | `allocator/tcmalloc-2`{only}" in text   # the family: its model's first words
    assert f"`allocator/tcmalloc-1`{only}" in text and "`allocator/tcmalloc-1`, `allocator/tcmalloc-2`" not in text
