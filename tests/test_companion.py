"""The companion studies' cells (passes: forward/gradient time with a threads axis) and their report section."""

import json

import pytest

from harness.config import matrix
from harness.errors import HarnessError
from harness.report import build as report
from tests.helpers import harness, write_run


def test_passes_cells_cover_the_threads_axis_and_the_matrix_models():
    m = matrix.load()
    quick = [c for c in m.expand("quick") if c.kind == "passes"]
    assert {c.id for c in quick} == {f"passes/lstm/{fw}/{mode}/threads{t}" for fw, mode in
                                     (("pytorch", "eager"), ("mindspore", "graph")) for t in (1, "all")}
    assert all(c.spec.batch == 16 and c.spec.dataset == "imdb" for c in quick)
    full = [c for c in m.expand("companion") if c.kind == "passes"]
    assert {c.spec.threads for c in full} == {1, 2, "all"}
    assert {c.model for c in full} == {"resnet50", "gru", "googlenet", "lstm"}


def test_a_profile_naming_an_unknown_passes_model_is_refused(tmp_path):
    m = matrix.load()
    m.data["profiles"]["quick"] = {**m.data["profiles"]["quick"], "passes": ["nope"]}
    with pytest.raises(HarnessError, match="passes names model 'nope'"):
        m.expand("quick")


def test_a_passes_cell_times_forward_and_gradient_at_the_threads_asked(tmp_path):
    out = tmp_path / "run"
    p = harness("run", "--profile", "quick", "--platform", "cpu", "--synthetic", "--out", out,
                "--only", "passes/lstm/pytorch/eager/threads1")
    assert p.returncode == 0, p.stdout + p.stderr
    [path] = out.glob("**/r0.json")
    r = json.loads(path.read_text())
    assert r["status"] == "ok" and r["kind"] == "passes" and r["batch"] == 16 and r["threads"] == 1
    assert r["settings"]["threads"] == 1 and r["settings"]["threads_api"] == "torch.set_num_threads"
    for name in ("forward", "gradient"):
        assert r[f"{name}_median_s"] > 0 and r[f"{name}_iqr_s"] >= 0 and r[f"{name}_blocks"] >= 5
    assert r["gradient_median_s"] > r["forward_median_s"]  # a backward pass costs more than nothing


def _companion_run(tmp_path):
    base = {"status": "ok", "platform": "cpu", "devices": 1, "synthetic": False, "repeat": 0}
    results = [
        {**base, "cell": "inference/resnet50_imagenet/pytorch/eager/amp-off/batch2", "kind": "inference",
         "model": "resnet50_imagenet", "framework": "pytorch", "mode": "eager", "amp": "off", "batch": 2,
         "throughput": 4.0, "median_s": 0.5, "iqr_s": 0.01},
        {**base, "cell": "passes/lstm/mindspore/graph/threads1", "kind": "passes", "model": "lstm",
         "framework": "mindspore", "mode": "graph", "amp": "off", "threads": 1, "batch": 16,
         "forward_median_s": 0.002, "forward_iqr_s": 0.0001, "gradient_median_s": 0.006, "gradient_iqr_s": 0.0002},
        {**base, "cell": "model/googlenet/pytorch/eager/amp-off/1dev", "kind": "model", "model": "googlenet",
         "framework": "pytorch", "mode": "eager", "amp": "off", "wall_s": 321.0, "test_metric": 0.5,
         "time_to_target_s": None, "epochs": [{"epoch": 0, "train_s": 300.0, "loss": 1.25, "samples": 16}]},
    ]
    return write_run(tmp_path / "run", "cpu", {"hostname": "h", "cpu": {"model": "Xeon_%", "cores": 2}}, results)


def test_the_report_puts_each_study_beside_this_run_with_its_hardware(tmp_path):
    run = _companion_run(tmp_path)
    report.render([run])
    html = (run / "report" / "report.html").read_text()
    section = html[html.index('id="companion"'):html.index('id="settings"')]
    for published in ("126.87 min", "94.68%", "1,490.2", "856.5", "2,115.0", "7.7 s", "1.9 s"):
        assert published in section, published
    assert "no: this host is CPU: Xeon_% (2 cores)" in section  # S1's V100 / Ascend 910 are not this host
    assert "4.0" in section and "500.0" in section            # images/s and ms per batch measured
    assert "250.0 s per 1,000 images" in section               # S2's ResNet-50 row from the same cell
    assert "2.00" in section and "6.00" in section and "3.00" in section  # forward, gradient (ms) and their ratio
    assert "321.0" in section and "1.2500" in section and "50.00%" in section  # googlenet wall time, loss, accuracy
    assert "do not depend on the pixel values" in section or "does not depend on the pixel values" in section
    tables = run / "report" / "tables"
    for name in ("companion_s1_training", "companion_s1_inference", "companion_s2", "companion_s4"):
        tex = (tables / f"{name}.tex").read_text()
        assert r"\begin{tabular}" in tex and "Xeon\\_\\%" in tex, name
    assert "126.87 min" in (tables / "companion_s1_training.tex").read_text()
    assert r"\subsection*{Companion studies}" in (run / "report" / "report.tex").read_text()


def test_s1_bert_ratio_sits_beside_this_runs_with_its_caveat():
    from harness.report.companion import s1_ratio_rows

    training = [{"model": "bert", "framework": "pytorch", "mode": "eager", "amp": "off", "wall_s": 20.0},
                {"model": "bert", "framework": "mindspore", "mode": "graph", "amp": "off", "wall_s": 30.0},
                {"model": "bert", "framework": "mindspore", "mode": "graph", "amp": "O2", "wall_s": 1.0}]
    rows = s1_ratio_rows(training)
    assert [(r["model"], r["mode"]) for r in rows] == [("bert", "graph"), ("bert", "pynative")]
    assert abs(rows[0]["s1_ratio"] - 610 / 1147.5) < 1e-12 and rows[0]["ratio"] == 1.5 and rows[1]["ratio"] is None
    assert "Chinese Wikipedia" in rows[0]["caveat"]
