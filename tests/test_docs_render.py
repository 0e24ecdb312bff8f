"""Numbers from runs are rendered into the docs (harness.docs.blocks), never typed, and this test keeps them current:
a block edited by hand, or a committed run folder that changed, fails `test_committed_docs_are_current` until
`python -m harness docs --write`. tools/publish_run.py leaves no machine path and no symlink in a published folder,
and never changes a result's numbers."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.docs import blocks as docs
from harness.errors import HarnessError
from tests.helpers import REPO, harness

sys.path.insert(0, str(REPO / "tools"))
try:
    import publish_run
finally:
    sys.path.remove(str(REPO / "tools"))

SOURCE = REPO / "docs" / "target" / "run-2026-11-25-cpu"   # a committed target-profile run, 3 repeats


def _markdown(names) -> str:
    return "".join(f"## {n}\n\n<!-- rendered:{n} -->\n(not rendered yet)\n<!-- /rendered:{n} -->\n\nprose\n\n"
                   for n in names)


@pytest.fixture
def repo(tmp_path):
    """A repository in miniature: docs/runs/cpu-quick and cpu-target (copies of SOURCE), the committed GPU runs, the
    Intel Xeon's quick run and docs/at-best, reproduce.sh, and the doc files."""
    for run in (docs.QUICK, docs.TARGET):
        shutil.copytree(SOURCE, tmp_path / docs.RUNS_DIR / run, symlinks=True)
    for run in docs.GPU:
        shutil.copytree(REPO / docs.RUNS_DIR / run, tmp_path / docs.RUNS_DIR / run, symlinks=True)
    (tmp_path / docs.RUNS_DIR / "allocator").symlink_to(REPO / docs.RUNS_DIR / "allocator")   # read, never written
    (tmp_path / docs.RUNS_DIR / docs.QUICK_INTEL).symlink_to(REPO / docs.RUNS_DIR / docs.QUICK_INTEL)   # likewise
    shutil.copytree(REPO / "docs" / "at-best", tmp_path / "docs" / "at-best")   # the GPU measurements beside them
    shutil.copy(REPO / "reproduce.sh", tmp_path / "reproduce.sh")                # each platform's default profile
    meta = tmp_path / docs.RUNS_DIR / docs.QUICK / "run.json"   # the stand-in for the quick profile's run
    meta.write_text(meta.read_text().replace('"profile": "target"', '"profile": "quick"'))
    for name in {b.file for b in docs.BLOCKS}:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(_markdown(b.name for b in docs.BLOCKS if b.file == name))
    return tmp_path


def _plant(path: Path, block: str, old: str, new: str) -> None:
    text = path.read_text()
    a = text.index(f"<!-- rendered:{block} -->")
    b = text.index(f"<!-- /rendered:{block} -->")
    assert old in text[a:b], (old, text[a:b])
    path.write_text(text[:a] + text[a:b].replace(old, new, 1) + text[b:])


def test_render_then_check_is_clean(repo):
    assert len(docs.check(repo)) == len(docs.BLOCKS)   # every block still says "(not rendered yet)"
    assert docs.write(repo) == [b.label for b in docs.BLOCKS]
    assert docs.check(repo) == []
    assert docs.write(repo) == []   # nothing left to rewrite
    text = (repo / "ARTIFACT.md").read_text()
    assert "prose" in text and "(not rendered yet)" not in text
    assert "done: 18 ok; results in DIR" in text          # 6 cells x 3 repeats, as the runner's closing line counts
    assert "1 h 01 min 13 s" in text                         # 00:14:58 to 01:16:11
    assert "AMD EPYC (2 cores, 23.5 GiB)" in text
    assert "| GRU | 1 min 05 s | 2 min 41 s | 0.41 | 0.34–0.50 | 0.47 |" in text
    assert "python -m harness run --platform cpu --profile target --out DIR`" in text   # argv, its paths left out
    assert "/work/" not in text


def test_a_stale_number_is_reported_and_rewritten(repo):
    docs.write(repo)
    _plant(repo / "ARTIFACT.md", "expected-cpu", "0.34–0.50", "0.30–0.50")
    assert docs.check(repo) == ["ARTIFACT.md: expected-cpu"]
    p = harness("docs", "--check", "--repo", repo)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "ARTIFACT.md: expected-cpu" in lines[0] and docs.FIX in lines[0], p.stderr
    p = harness("docs", "--write", "--repo", repo)
    assert p.returncode == 0 and "ARTIFACT.md: expected-cpu" in p.stdout, p.stderr
    assert harness("docs", "--check", "--repo", repo).returncode == 0
    assert docs.check(repo) == []


def test_a_changed_run_makes_its_blocks_stale(repo):
    docs.write(repo)
    meta = repo / docs.RUNS_DIR / docs.TARGET / "run.json"
    meta.write_text(meta.read_text().replace("2026-11-25T0", "2026-11-26T0"))   # its date, a day later
    stale = docs.check(repo)   # the blocks that state the run's date; a table of its ratios alone stays as it was
    assert set(stale) <= {b.label for b in docs.BLOCKS if docs.TARGET in b.runs}
    assert {"ARTIFACT.md: checklist-times", "ARTIFACT.md: expected-cpu", "ARTIFACT.md: where-ran"} <= set(stale)


def test_missing_markers_and_missing_runs_are_one_line(repo):
    (repo / "README.md").write_text("no markers here\n")
    with pytest.raises(HarnessError, match=r"README.md has no block readme-times: add a line"):
        docs.check(repo)
    p = harness("docs", "--check", "--repo", repo)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "readme-times" in p.stderr, p.stderr
    (repo / "README.md").write_text(_markdown(["readme-times"]) + "<!-- /rendered:readme-times -->\n")
    with pytest.raises(HarnessError, match="markers of block readme-times are broken"):
        docs.check(repo)
    shutil.rmtree(repo / docs.RUNS_DIR / docs.QUICK)
    with pytest.raises(HarnessError, match="docs/runs/cpu-quick is not committed; publish it"):
        docs.check(repo)


@pytest.mark.parametrize("block", docs.BLOCKS, ids=lambda b: b.label)
def test_committed_docs_are_current(block):
    """The repository's own docs: every declared block renders to what the doc file holds."""
    missing = docs.missing_runs(REPO, block)
    if missing:
        pytest.skip(f"{block.label}: run folders not committed yet: {', '.join(missing)} (publish with "
                    f"tools/publish_run.py, then `{docs.FIX}`)")
    assert docs.has_markers(REPO, block), f"{block.file} lacks the markers of block {block.name}"
    assert docs.check(REPO, [block]) == [], f"{block.label} is stale: run `{docs.FIX}`"


def _strings_masked(obj):
    if isinstance(obj, str):
        return "<str>"
    if isinstance(obj, dict):
        return {k: _strings_masked(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strings_masked(v) for v in obj]
    return obj


def test_publish_leaves_no_machine_path_and_keeps_the_numbers(tmp_path):
    src = tmp_path / "run"
    shutil.copytree(SOURCE, src, symlinks=True)
    (src / ".interpreter").mkdir(exist_ok=True)
    (src / "link").symlink_to(src / "run.json")
    (src / ".interpreter" / "python-link").symlink_to(sys.executable)
    cell = next(src.glob("cells/**/r0.json")).parent
    (cell / "r0.child.json").write_text("{}")
    (cell / "r0.prev1.json").write_text("{}")
    spec = json.loads((cell / "r0.spec.json").read_text())
    spec["extra"] = f"{tmp_path}/elsewhere and /home/someone/x and /root/.cache/y"
    (cell / "r0.spec.json").write_text(json.dumps(spec))

    dest = tmp_path / "repo" / "docs" / "runs" / "cpu-target"
    assert publish_run.main([str(src), str(dest)]) == 0
    assert not [p for p in dest.rglob("*") if p.is_symlink()]
    assert not (dest / ".interpreter").exists() and not (dest / "link").exists()
    assert not list(dest.rglob("*.child.json")) and not list(dest.rglob("*.prev1.json"))
    for p in dest.rglob("*"):
        if p.is_file() and p.suffix in publish_run.TEXT:
            text = p.read_text()
            for needle in ("/work/", "/root/", "/home/", "/tmp/", str(REPO), str(tmp_path)):
                assert needle not in text, (p, needle)
    spec = json.loads((dest / cell.relative_to(src) / "r0.spec.json").read_text())
    assert spec["log"] == f"{cell.relative_to(src).as_posix()}/r0.log"
    assert spec["data_folder"].startswith("DATA/")
    meta = json.loads((dest / "run.json").read_text())
    argv = meta["invocations"][0]["argv"]
    assert argv[argv.index("--out") + 1] == "DIR" and argv[argv.index("--data-dir") + 1] == "DATA"
    assert meta["matrix"] == "harness/config/matrix.toml"

    results = sorted(p.relative_to(src) for p in src.glob("cells/**/r*.json") if publish_run.RESULT.match(p.name))
    assert results and results == sorted(p.relative_to(dest) for p in dest.glob("cells/**/r*.json")
                                         if publish_run.RESULT.match(p.name))
    for rel in results:
        before, after = json.loads((src / rel).read_text()), json.loads((dest / rel).read_text())
        assert _strings_masked(before) == _strings_masked(after), rel
        assert {k: v for k, v in before.items() if not isinstance(v, str | list | dict)} == \
               {k: v for k, v in after.items() if not isinstance(v, str | list | dict)}, rel

    assert publish_run.main(["--in-place", str(dest)]) == 0   # scrubbing a published folder changes nothing
    assert publish_run.leftovers(dest) == []


def test_published_committed_runs_are_clean():
    for run in sorted((REPO / "docs").glob("*/run-*")) + sorted((REPO / docs.RUNS_DIR).glob("*")):
        if (run / "run.json").is_file():
            assert publish_run.leftovers(run) == [], f"{run}: scrub it with tools/publish_run.py --in-place"
