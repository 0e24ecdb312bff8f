import json

import pytest

from harness.results.store import RunStore, write_json_atomic
from tests.helpers import harness


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    write_json_atomic(tmp_path / "a" / "x.json", {"k": 1})
    write_json_atomic(tmp_path / "a" / "x.json", {"k": 2})
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"k": 2}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]


def test_a_result_is_never_overwritten_in_place(tmp_path):
    store = RunStore(tmp_path)
    store.write_result("model/m/pytorch/eager/amp-off/1dev", 0, {"status": "failed"})
    with pytest.raises(FileExistsError):
        store.write_result("model/m/pytorch/eager/amp-off/1dev", 0, {"status": "ok"})
    store.path("model/m/pytorch/eager/amp-off/1dev", 0, ".log").write_text("old log")
    moved = store.retire("model/m/pytorch/eager/amp-off/1dev", 0)
    assert moved.name == "r0.prev1.json" and json.loads(moved.read_text()) == {"status": "failed"}
    assert store.path("model/m/pytorch/eager/amp-off/1dev", 0, ".prev1.log").read_text() == "old log"
    store.write_result("model/m/pytorch/eager/amp-off/1dev", 0, {"status": "ok"})
    assert [r["status"] for r in store.results()] == ["ok"]  # earlier attempts are kept, not listed


def _run_folder(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"platform": "cpu", "profile": "quick", "invocations": []}))
    good = tmp_path / "cells" / "model" / "gcn" / "pytorch" / "eager" / "amp-off" / "1dev"
    good.mkdir(parents=True)
    (good / "r0.json").write_text(json.dumps({"cell": "model/gcn/pytorch/eager/amp-off/1dev", "status": "ok"}))
    bad = tmp_path / "cells" / "model" / "gcn" / "mindspore" / "graph" / "amp-off" / "1dev"
    bad.mkdir(parents=True)
    (bad / "r0.json").write_text('{"cell": "model/gcn/mindspore/gr')  # cut short
    return tmp_path


def test_corrupt_cell_json_is_reported_not_crashed_on(tmp_path):
    results = RunStore(_run_folder(tmp_path)).results()
    by_cell = {r["cell"]: r for r in results}
    corrupt = by_cell["model/gcn/mindspore/graph/amp-off/1dev"]
    assert corrupt["status"] == "failed" and corrupt["corrupt"] and "corrupt result file" in corrupt["reason"]
    assert by_cell["model/gcn/pytorch/eager/amp-off/1dev"]["status"] == "ok"


def test_results_cli_warns_about_a_corrupt_file_in_one_line(tmp_path):
    p = harness("results", _run_folder(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)) == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("warning: corrupt result file")
