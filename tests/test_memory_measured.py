"""The report's "device memory: predicted vs measured" table (harness.report.memory_measured): an accelerator run's cell
beside its CPU-side prediction, a CPU run named as not measured, a cell at other sizes not compared, and the
committed GPU runs (recorded before the reserved peak was) still read."""

from pathlib import Path

import pytest

from harness.config.matrix import load
from harness.devices import memory as devicememory
from harness.report import build as report
from harness.report import memory_measured
from harness.results.store import RunStore, write_json_atomic

REPO = Path(__file__).resolve().parent.parent
RESNET = "model/resnet50/pytorch/eager/amp-off/1dev"
GRU_MS = "model/gru/mindspore/graph/amp-off/1dev"


def _run(folder: Path, platform: str, cells: dict, profile: str = "accelerator") -> Path:
    """A run folder written by hand: each cell's spec at its profile's sizes and one ok result with `keys`."""
    store = RunStore(folder)
    write_json_atomic(folder / "run.json", {"schema": 2, "platform": platform, "profile": profile})
    write_json_atomic(folder / "env.json", {"hostname": f"unit-test-{platform}"})
    by_id = {c.id: c for c in load().expand(profile)}
    for cid, keys in cells.items():
        c = by_id[cid]
        write_json_atomic(store.path(cid, 0, ".spec.json"), {"cell": c.to_dict(), "repeat": 0, "platform": platform})
        store.write_result(cid, 0, {"schema": 2, "cell": cid, "repeat": 0, "status": "ok", "kind": c.kind,
                                    "model": c.model, "framework": c.framework, "mode": c.mode, "amp": c.amp,
                                    "devices": c.devices, "platform": platform, **keys})
    return folder


def test_a_measured_peak_is_shown_beside_its_prediction_and_a_cpu_run_as_not_measured(tmp_path):
    # A unit-test fixture, not a measurement: made-up peaks for one accelerator cell, none for a MindSpore one.
    fake = {"framework_peak_memory_mb": 4096.0, "framework_reserved_memory_mb": 5120.0,
            "peak_device_memory_mb": 6144.0}
    gpu = _run(tmp_path / "gpu", "cuda", {RESNET: fake, GRU_MS: {}})
    cpu = _run(tmp_path / "cpu", "cpu", {"model/gcn/pytorch/eager/amp-off/1dev": {}}, profile="quick")
    hosts, merged = report.merge([gpu, cpu])
    got = memory_measured.table(hosts, merged)
    assert got["cpu"] == ["cpu (quick)"]                                     # labelled apart: two profiles
    rows = {(r["model"], r["framework"]): r for r in got["rows"]}
    assert set(rows) == {("resnet50", "pytorch"), ("gru", "mindspore")}   # the CPU run's cell is not a row
    resnet = rows["resnet50", "pytorch"]
    predicted = devicememory.load()["models"]["resnet50"]["fp32"]["peak_bytes"] / 2**30
    assert resnet["predicted_gib"] == pytest.approx(predicted)
    assert (resnet["allocated"], resnet["reserved"], resnet["device"]) == (4.0, 5.0, 6.0)
    assert resnet["ratio"] == pytest.approx(4.0 / predicted) and resnet["note"] is None
    assert not rows["gru", "mindspore"]["measured"] and rows["gru", "mindspore"]["ratio"] is None

    html = report._environments()[0].get_template("device_memory.html.j2").render(device_memory=got)
    assert "Device memory: predicted vs measured" in html
    assert ("<td>cuda (accelerator)</td><td>resnet50</td><td>fp32</td><td>pytorch</td><td>eager</td>"
            "<td class=\"num\">1</td><td>128</td>") in html
    assert f">{predicted:,.2f}</td><td class=\"num\">4.00</td><td class=\"num\">5.00</td>" in html
    assert f"<td class=\"num\">6.00</td><td class=\"num\">{4.0 / predicted:.2f}</td>" in html
    assert "<td colspan=\"3\">not measured</td>" in html                      # the MindSpore cell measured nothing
    assert "cpu (quick): not measured (the run was on a CPU" in html


def test_a_cell_at_other_sizes_is_not_compared(tmp_path):
    quick = _run(tmp_path / "quick", "cuda", {RESNET: {"framework_peak_memory_mb": 900.0}}, profile="quick")
    row = memory_measured.table(*report.merge([quick]))["rows"][0]
    assert row["ratio"] is None and row["note"].endswith("predicted at 128: not compared")
    assert row["allocated"] == pytest.approx(900 / 1024)


def test_the_committed_gpu_runs_still_load_without_a_reserved_peak():
    hosts, merged = report.merge([REPO / "docs" / "runs" / "cuda-gpuprobe"])
    rows = memory_measured.table(hosts, merged)["rows"]
    assert rows and all(r["reserved"] is None for r in rows)                 # recorded before the reserved peak
    assert any(r["allocated"] and r["ratio"] for r in rows)                   # ResNet50 at its accelerator size
