"""The facts several pages state come from one source each (harness.docs.facts, harness.docs.gpu), and reproduce.sh's
own words agree with it: the default profile of each platform, the repeats of each profile, the options its usage
line names. What ran where follows the committed runs: a run that holds what was never run turns its row around."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from harness.config import matrix
from harness.docs import blocks as docs
from harness.docs import facts as docs_facts
from harness.docs import gpu as docs_gpu
from harness.docs.render import Run
from tests.helpers import REPO

SCRIPT = REPO / "reproduce.sh"


def _help() -> str:
    return " ".join(subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True).stderr.split())


def _runs(*names: str) -> list[Run]:
    return [Run.load(REPO / docs.RUNS_DIR / n) for n in names]


def test_the_help_names_each_platforms_default_profile_as_the_script_picks_it():
    defaults = docs_facts.platform_defaults(REPO)
    assert defaults == {"cpu": "quick", "cuda": "accelerator", "ascend": "accelerator"}
    text = _help()
    for profile in set(defaults.values()):
        platforms = [p for p, d in defaults.items() if d == profile]
        said = re.search(rf"--{profile} .*?\(the default on ([a-z ,]+?)[;)]", text)
        assert said, profile
        assert sorted(re.findall(r"cpu|cuda|ascend", said.group(1))) == sorted(platforms), (profile, said.group(1))


def test_the_help_gives_each_profiles_claim_repeats_as_the_matrix_does():
    text = _help()
    m = matrix.load()
    for profile in ("quick", "target", "accelerator"):
        n = m.profile(profile)["claim_repeats"]
        said = re.search(r"--repeats N .*?claim_repeats for the cells a claim compares: ([^)]*)\)", text)
        assert said and re.search(rf"\b{n} for [a-z ,]*\b{profile}\b", said.group(1)), (profile, n)


def test_the_usage_lines_of_the_readme_and_the_developers_page_name_every_option():
    text = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True).stderr
    options = set(re.findall(r"--[a-z][a-z-]+", text.split("\n\n")[0]))
    for page in ("README.md", "docs/developers.md"):
        usage = next(line for line in (REPO / page).read_text().splitlines() if line.startswith("`./reproduce.sh "))
        missing = options - set(re.findall(r"--[a-z][a-z-]+", usage))
        assert not missing, f"{page}: the usage line lacks {sorted(missing)}"


def test_the_profiles_table_is_the_matrixs():
    text = docs_facts.profiles(_runs(docs.QUICK))
    m = matrix.load()
    for name in m.profiles:
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        cap = m.max_repeats(name)
        assert f"/ {cap} |" in row, (name, row)
    assert "| quick | `./reproduce.sh cpu` |" in text and "`./reproduce.sh cuda`, `./reproduce.sh ascend`" in text


def test_where_ran_follows_the_committed_runs():
    runs = _runs(*docs.ALL)
    text = docs_facts.where_ran(runs)
    assert "AMD EPYC (2 cores, 23.5 GiB)" in text and "one NVIDIA H200" in text and "NVIDIA H100" in text
    assert "MindSpore on a GPU" in text and "anything on an Ascend NPU" in text
    gpu = runs[-1]
    for res in gpu.results:
        if res.get("status") == "ok":
            res["framework"] = "mindspore"   # as if MindSpore had run on that GPU
            break
    assert "MindSpore on a GPU" not in docs_facts.where_ran(runs)


def test_the_done_range_holds_the_committed_run():
    (quick,) = _runs(docs.QUICK)
    line = docs_facts.done_range([quick])
    low, high, had = map(int, re.search(r"N from (\d+) to (\d+); the committed run had (\d+)", line).groups())
    ok = sum(r.get("status") == "ok" for r in quick.results)
    assert had == ok and low <= ok <= high and low < high


def test_the_gpu_expectations_read_the_measured_files(tmp_path: Path):
    text = docs_gpu.expected_gpu(_runs(*docs.GPU))
    assert "5,237 vs 5,712 images/s" in text and "4,174 vs 4,925 images/s" in text   # H200, H100: AMP vs fp32
    assert "11,570 vs 14,410 sentence pairs/s" in text
    assert "**mixed** on one NVIDIA H100" in text and "**mixed** on one NVIDIA H200" in text
    assert "reference_gap-h200-first" not in text   # a superseded attempt is not evidence
    assert re.search(r"one GPU runs none of the accelerator profile's \d+ cells", text)


def test_the_test_commands_line_comes_from_its_record_and_names_a_failure(tmp_path):
    record = {"command": "tools/test.sh", "date": "2026-01-02", "plain_clone": True, "ci": True,
              "host": {"cpu": "Some CPU", "cores": 2, "memory_gib": 23.5, "arch": "x86_64"},
              "python": {"executable": "/usr/bin/python3.11", "version": "3.11.2"},
              "envs": [{"name": "lint", "status": "OK", "wall_s": 9}, {"name": "test", "status": "OK", "wall_s": 754}],
              "wall_s": 763, "disk_used_gib": 31.24}
    (tmp_path / "test-command.json").write_text(json.dumps(record))
    line = docs_facts.test_command([], tmp_path)
    assert "took 12 min 43 s (lint 9 s, test 12 min 34 s), every environment passing" in line
    assert "from a plain clone with nothing beside it" in line and "(3.11.2)" in line
    # the figure tools/test.sh refuses below (tests/test_script_failures.py), and the line says it does
    assert "; it needed 31.2 GiB of free disk at its peak, and with less free it says so and does not start " \
        "(2026-01-02)" in line
    record["envs"][1]["status"] = "FAILED"
    record["plain_clone"] = False
    (tmp_path / "test-command.json").write_text(json.dumps(record))
    line = docs_facts.test_command([], tmp_path)
    assert "and failed in test" in line and "beside a ../shared folder" in line
    record["lanes"] = 2   # tools/test.sh's two lanes: the environments' times overlap, and the line says so
    (tmp_path / "test-command.json").write_text(json.dumps(record))
    assert "took 12 min 43 s (in two lanes at once, lint and test beside main, image and image-cuda: lint 9 s, " \
        "test 12 min 34 s)" in docs_facts.test_command([], tmp_path)
    (tmp_path / "test-command.json").write_text("{")
    with pytest.raises(docs_facts.HarnessError, match="cannot read the test command's record"):
        docs_facts.test_command([], tmp_path)


def test_the_fresh_host_transcripts_are_published_without_the_machines_paths():
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    try:
        from publish_fresh_host import scrub
    finally:
        sys.path.remove(str(REPO / "tools"))
    checkout = Path("/tmp/plain/artifact")
    text = ("| run | 0 | report: /root/walk.t35UKM/run/report/report.html |\n"
            "| resume | `--out /tmp/walk.0X05tQ/run` | report: /home/reviewer/walk.G5AGMk/run/report/report.html |\n"
            "| dry-run | `--data-dir /tmp/plain/artifact/.cache/image-check/walk-data` | from /tmp/plain/artifact |\n")
    assert scrub(text, checkout) == (
        "| run | 0 | report: WALK/run/report/report.html |\n"
        "| resume | `--out WALK/run` | report: WALK/run/report/report.html |\n"
        "| dry-run | `--data-dir .cache/image-check/walk-data` | from . |\n")
    published = sorted((REPO / "docs" / "runs" / "fresh-host").iterdir())
    names = {p.name for p in published}
    assert {"README.md", "test-command.json", "pristine-bookworm-root.md", "walk-podman.md"} <= names
    for path in published:
        text = path.read_text()
        assert "/tmp/" not in text and "/root/" not in text and "walk." not in text.replace("walk.sh", ""), path.name
