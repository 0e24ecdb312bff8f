"""What `harness report` merges: run folders of one experiment (platform, profile, matrix file) merge, their cells'
results as repeats where each ran the same settings; folders of different experiments stay apart, each its own
labelled column group; results of one cell that ran different settings in one experiment are refused in one line.
 The fixture is two run folders of a real run on one NVIDIA H200 (profiles `gpuprobe` and `quick`, the harness's own
output, local paths replaced by PROJECT and RUN), reduced to the ResNet50 fp32 PyTorch eager cell: 4,992 training
images an epoch at batch 128 in one, 32 at batch 16 in the other. Merged as repeats of one cell, Table I once read
"2,981 (692-5,270), ok 2/2" for them."""

import copy
import json
import shutil
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.report import build as report
from tests.helpers import harness

FIXTURE = Path(__file__).parent / "fixtures" / "h200_two_profiles"
CELL = "model/resnet50/pytorch/eager/amp-off/1dev"


def _copy(tmp_path: Path, name: str, as_name: str | None = None) -> Path:
    run = tmp_path / (as_name or name)
    shutil.copytree(FIXTURE / name, run)
    return run


def _edit_json(path: Path, edit) -> None:
    obj = json.loads(path.read_text())
    edit(obj)
    path.write_text(json.dumps(obj))


def _add_repeat(run: Path, repeat: int, other_epochs: float, spec_edit=lambda cell: None) -> None:
    """A further repeat of CELL in `run`: its result (r0's, another throughput) and its spec (r0's, edited)."""
    folder = run / "cells" / CELL
    result = json.loads((folder / "r0.json").read_text())
    result.update(repeat=repeat, mean_throughput_other_epochs=other_epochs)
    (folder / f"r{repeat}.json").write_text(json.dumps(result))
    spec = json.loads((folder / "r0.spec.json").read_text())
    spec["repeat"] = repeat
    spec_edit(spec["cell"])
    (folder / f"r{repeat}.spec.json").write_text(json.dumps(spec))


def _table1_row(tex: str, start: str) -> list[str]:
    line = next(ln for ln in tex.splitlines() if ln.startswith(start))
    return [c.strip() for c in line.removesuffix("\\\\").split(" & ")]


@pytest.fixture(scope="module")
def two_profiles(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge")
    gpuprobe, quick = _copy(root, "gpuprobe"), _copy(root, "quick")
    html = report.render([gpuprobe, quick], root / "out").read_text()
    return root / "out", html, report.collect([gpuprobe, quick])


def test_runs_of_two_profiles_are_two_labelled_column_groups_not_two_repeats(two_profiles):
    out, html, data = two_profiles
    assert [h["label"] for h in data["hosts"]] == ["cuda (gpuprobe)", "cuda (quick)"]
    rows = {r["host"]: r for r in data["rows"] if r["cell"] == CELL}
    assert set(rows) == {"cuda (gpuprobe)", "cuda (quick)"}
    assert all(r["repeats"] == 1 and r["other_epochs"]["n"] == 1 for r in rows.values())
    assert round(rows["cuda (gpuprobe)"]["other_epochs"]["median"], 1) == 5270.4
    assert round(rows["cuda (quick)"]["other_epochs"]["median"], 1) == 692.1

    tex = (out / "tables" / "table1.tex").read_text()
    assert r"\multicolumn{6}{c}{cuda (gpuprobe)}& \multicolumn{6}{c}{cuda (quick)}" in tex
    row = _table1_row(tex, "resnet50 & pytorch & eager & off & 1 &")
    assert row[5:11] == ["260.9", "5,270.4", "--", "--", "7,318", "149.4"]   # under cuda (gpuprobe)
    assert row[11:17] == ["1.9", "692.1", "--", "--", "2,126", "122.7"]      # under cuda (quick)
    assert "2,981" not in tex

    table1 = html[html.index('<h2 id="table1">'):html.index('<h2 id="ttt">')]
    assert '<th class="group" colspan="7">cuda (gpuprobe)</th><th class="group" colspan="7">cuda (quick)</th>' in table1
    assert "ok 2/2" not in table1 and "5,270.4" in table1 and "692.1" in table1
    assert "figures/fig3-cuda-gpuprobe.pdf" in html and "figures/fig3-cuda-quick.pdf" in html


def test_one_folder_keeps_its_plain_label(tmp_path):
    assert [h["label"] for h in report.collect([_copy(tmp_path, "quick")])["hosts"]] == ["cuda"]


def test_two_matrix_files_of_one_profile_are_two_experiments(tmp_path):
    a, b = _copy(tmp_path, "quick", "a"), _copy(tmp_path, "quick", "b")
    _edit_json(b / "run.json", lambda m: m.update(matrix_sha256="0123456789abcdef" * 4))
    data = report.collect([a, b])
    assert [h["label"] for h in data["hosts"]] == ["cuda (matrix e74a6f3f)", "cuda (matrix 01234567)"]
    assert [r["repeats"] for r in data["rows"] if r["cell"] == CELL] == [1, 1]


def test_different_settings_in_one_experiment_are_refused_naming_both_folders(tmp_path):
    """The quick folder's run.json made to say gpuprobe (its profile and matrix): one experiment by its run.json,
    but its ResNet50 cell ran the quick profile's settings. No label can keep the two apart: one line, exit 2."""
    gpuprobe = _copy(tmp_path, "gpuprobe")
    quick = _copy(tmp_path, "quick", "quick-as-gpuprobe")
    meta = json.loads((gpuprobe / "run.json").read_text())
    _edit_json(quick / "run.json", lambda m: m.update(profile=meta["profile"], matrix_sha256=meta["matrix_sha256"]))
    p = harness("report", gpuprobe, quick, "--out", tmp_path / "out", timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    line, = p.stderr.strip().splitlines()
    assert line.startswith(f"error: {CELL} ran different settings in {gpuprobe} (r0) and {quick} (r0): ")
    assert "hparams.batch 128 vs 16" in line and "report each folder on its own" in line
    assert not (tmp_path / "out" / "report.html").exists()


def test_a_resumed_run_with_more_repeats_merges_them(tmp_path):
    """--resume with --repeats raised: the new repeat's spec asks for more repeats (and may have another time limit);
    it ran the same settings, so it is a repeat of the same cell."""
    run = _copy(tmp_path, "gpuprobe")
    _add_repeat(run, 1, 5100.0, lambda cell: cell.update(repeats=3, timeout_s=1800.0))
    _add_repeat(run, 2, 5300.0, lambda cell: cell.update(repeats=3))
    row, = (r for r in report.collect([run])["rows"] if r["cell"] == CELL)
    assert (row["repeats"], row["other_epochs"]["n"], row["other_epochs"]["median"]) == (3, 3, 5270.35709873581)


def test_a_resumed_run_whose_settings_changed_is_refused(tmp_path):
    run = _copy(tmp_path, "gpuprobe")
    _add_repeat(run, 1, 5100.0, lambda cell: cell["spec"].update(train_samples=12800))
    with pytest.raises(HarnessError) as e:
        report.collect([run])
    assert f"{CELL} ran different settings in {run} (r0) and {run} (r1): train_samples 25600 vs 12800" in str(e.value)
    assert "re-run the cell into a new --out" in str(e.value)


def test_a_multi_node_run_and_its_one_host_run_merge(tmp_path):
    """`harness report runs/nodes runs/one-host`: the same profile and matrix, the data-parallel cell in one folder and
    the 1-device cell its efficiency is measured against in the other: one column group, the efficiency made from
    the other folder's 1-device cell."""
    one_host = _copy(tmp_path, "gpuprobe", "one-host")
    nodes = _copy(tmp_path, "gpuprobe", "nodes")
    _edit_json(nodes / "run.json", lambda m: m.update(nodes=2, node_rank=0))
    shutil.rmtree(nodes / "cells")
    cell = "scaling/resnet50/pytorch/eager/amp-off/2x1dev"
    folder = nodes / "cells" / cell
    folder.mkdir(parents=True)
    result = json.loads((one_host / "cells" / CELL / "r0.json").read_text())
    result.update(cell=cell, kind="scaling", devices=2, nodes=2, global_throughput=9000.0, efficiency=None)
    (folder / "r0.json").write_text(json.dumps(result))
    spec = json.loads((one_host / "cells" / CELL / "r0.spec.json").read_text())
    spec["cell"] = copy.deepcopy(spec["cell"]) | {"id": cell, "kind": "scaling", "devices": 2, "nodes": 2}
    (folder / "r0.spec.json").write_text(json.dumps(spec))
    data = report.collect([nodes, one_host])
    assert [h["label"] for h in data["hosts"]] == ["cuda"]
    scaling, = (r for r in data["rows"] if r["cell"] == cell)
    assert scaling["devices_label"] == "2 (2 nodes x 1)"
    assert scaling["efficiency"] == pytest.approx(9000.0 / 2 / 5270.35709873581)
