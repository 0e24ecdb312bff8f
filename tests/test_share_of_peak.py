"""How far each model cell is from its device's limit: the FLOPs per training sample counted once (one PyTorch step
under torch.utils.flop_counter, in the profiled pass, on a CPU too), times the throughput of the epochs after the
first, over the device's dense peak at the cell's precision; in Table I (HTML and LaTeX) and the "Why" section.
 The GPU case is the ResNet50 fp32 PyTorch eager cell of a real run on one NVIDIA H200 (tests/fixtures/
h200_two_profiles/gpuprobe: 5,270 images/s), with the count a training step of the CIFAR variant makes (7.78 GFLOP an
image, tests/test_profiling_device.py) written into its profile: 41 TFLOP/s, 61% of the H200's FP32 67 TFLOP/s."""

import copy
import json
import re
import shutil
import tempfile
import types
from html import unescape
from pathlib import Path

import pytest

from harness.devices import query
from harness.report import build as report

FIXTURE = Path(__file__).parent / "fixtures" / "h200_two_profiles" / "gpuprobe"
CELL = "model/resnet50/pytorch/eager/amp-off/1dev"
RESNET50_FLOPS = 7.78e9


def _table1(html: str) -> str:
    return unescape(html[html.index('<h2 id="table1">'):html.index('<h2 id="ttt">')])


def _cells(html_row: str) -> list[str]:
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html_row, flags=re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]


@pytest.fixture
def h200(tmp_path):
    run = tmp_path / "gpuprobe"
    shutil.copytree(FIXTURE, run)
    path = run / "cells" / CELL / "r0.json"
    result = json.loads(path.read_text())
    result["profile"]["flops_per_sample"] = RESNET50_FLOPS
    path.write_text(json.dumps(result))
    out = tmp_path / "report"
    html = report.render([run], out).read_text()
    return run, out, html


def test_the_h200_resnet50_cell_reaches_41_tflops_61_percent_of_fp32_peak(h200):
    run, out, html = h200
    (row,) = [r for r in report.collect([run])["rows"] if r["cell"] == CELL]
    limit = row["limit"]
    assert limit["device"] == "NVIDIA H200" and limit["precision"] == "fp32" and limit["peak"] == 67e12
    assert limit["flops_per_s"] == pytest.approx(RESNET50_FLOPS * 5270.357, rel=1e-6)
    assert limit["share"] == pytest.approx(0.612, abs=0.001) and limit["tf32"]
    table = _table1(html)
    assert "<th>FLOP/s</th><th>% of peak*</th>" in table
    line = next(r for r in re.findall(r"<tr>.*?</tr>", table, flags=re.S) if ">resnet50<" in r)
    assert _cells(line)[6:12] == ["260.9", "5,270.4", "41.0 T", "61%*", "7,318", "149.4"]
    assert "share of the FP32 peak can pass 100%" in table   # the TF32 footnote
    tex = (out / "tables" / "table1.tex").read_text()
    assert r"resnet50 & pytorch & eager & off & 1 & 260.9 & 5,270.4 & 41.0 T & 61\%$^*$ & 7,318 & 149.4 \\" in tex
    assert r"\multicolumn{6}{c}{cuda}" in tex and r"\cmidrule(lr){6-11}" in tex
    assert "can pass 100\\%" in tex


def test_the_why_section_says_how_far_the_cell_is_from_the_devices_limit(h200):
    _, out, html = h200
    sentence = ("ResNet50 on CIFAR-10, cuda, against the device's limit: PyTorch eager reaches 41.0 TFLOP/s, 61% of "
                "the NVIDIA H200's fp32 peak (67.0 TFLOP/s): close to the device's limit.")
    assert f'<p class="limit">{sentence}</p>' in unescape(html)
    assert sentence.replace("%", r"\%") in (out / "tables" / "why.tex").read_text()


def test_an_amp_cell_is_held_to_the_half_precision_peak_with_the_fp32_cells_count(h200):
    run, _, _ = h200
    fp32 = json.loads((run / "cells" / CELL / "r0.json").read_text())
    o2_cell, gru_cell = CELL.replace("amp-off", "amp-O2"), CELL.replace("resnet50", "gru")
    # the same run's O2 cell (3,747 images/s there) and a model the pass counted nothing for
    for cell, extra in ((o2_cell, {"amp": "O2", "mean_throughput_other_epochs": 3747.2}),
                        (gru_cell, {"model": "gru", "mean_throughput_other_epochs": 14014.6})):
        (run / "cells" / cell).mkdir(parents=True)
        (run / "cells" / cell / "r0.json").write_text(json.dumps({**fp32, "cell": cell, "profile": None, **extra}))
    rows = {r["cell"]: r for r in report.collect([run])["rows"]}
    o2 = rows[o2_cell]["limit"]
    assert o2["flops_per_sample"] == RESNET50_FLOPS and o2["counted_by"] == CELL
    assert o2["precision"] == "fp16" and o2["peak"] == 989e12 and not o2["tf32"]
    assert o2["share"] == pytest.approx(RESNET50_FLOPS * 3747.2 / 989e12, rel=1e-6)
    assert rows[gru_cell]["limit"] is None


def _cpu_run(tmp_path: Path, flops: float | None) -> Path:
    """A CPU run of GCN: the PyTorch eager fp32 cell (profiled, with or without a count) and MindSpore GRAPH's."""
    pt = {"cell": "model/gcn/pytorch/eager/amp-off/1dev", "kind": "model", "model": "gcn", "framework": "pytorch",
          "mode": "eager", "amp": "off", "devices": 1, "status": "ok", "platform": "cpu", "synthetic": False,
          "throughput_unit": "nodes/s", "first_epoch_throughput": 1000.0, "mean_throughput_other_epochs": 2000.0,
          "time_to_target_s": 1.5, "best_metric": 0.8, "test_metric": 0.81, "metric": "accuracy", "target": 0.7,
          "profile": {"flops_per_sample": flops} if flops else None}
    ms = {**copy.deepcopy(pt), "cell": "model/gcn/mindspore/graph/amp-off/1dev", "framework": "mindspore",
          "mode": "graph", "mean_throughput_other_epochs": 4000.0, "profile": None}
    run = tmp_path / "cpu"
    (run / "cells").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"platform": "cpu", "profile": "quick", "invocations": []}))
    (run / "env.json").write_text(json.dumps({"hostname": "ci", "cpu": {"model": "x", "cores": 2}}))
    for r in (pt, ms):
        (run / "cells" / r["cell"]).mkdir(parents=True)
        (run / "cells" / r["cell"] / "r0.json").write_text(json.dumps({**r, "repeat": 0}))
    return run


def test_a_mindspore_cell_takes_its_pytorch_twins_count_and_a_cpu_knows_no_peak(tmp_path):
    run = _cpu_run(tmp_path, 5e6)
    rows = {r["framework"]: r for r in report.collect([run])["rows"]}
    assert rows["mindspore"]["limit"]["flops_per_sample"] == 5e6
    assert rows["mindspore"]["limit"]["counted_by"] == "model/gcn/pytorch/eager/amp-off/1dev"
    assert rows["mindspore"]["limit"]["flops_per_s"] == pytest.approx(2e10)
    assert rows["pytorch"]["limit"]["flops_per_s"] == pytest.approx(1e10)
    assert all(r["limit"]["share"] is None and r["limit"]["peak"] is None for r in rows.values())
    out = tmp_path / "report"
    table = _table1(report.render([run], out).read_text())
    lines = [_cells(r) for r in re.findall(r"<tr>.*?</tr>", table, flags=re.S) if ">gcn<" in r]
    assert [c[6:10] for c in lines] == [["1,000.0", "4,000.0", "20.0 G", "no peak known"],
                                       ["1,000.0", "2,000.0", "10.0 G", "no peak known"]]
    assert "% of peak*" not in table and 'id="tf32-note"' not in table   # no TF32 on a CPU
    tex = (out / "tables" / "table1.tex").read_text()
    assert r"& 4,000.0 & 20.0 G & --$^p$ &" in tex and r"& 2,000.0 & 10.0 G & --$^p$ &" in tex


def test_a_run_without_a_count_shows_dashes_and_loses_nothing(tmp_path):
    run = _cpu_run(tmp_path, None)
    out = tmp_path / "report"
    table = _table1(report.render([run], out).read_text())
    line = next(r for r in re.findall(r"<tr>.*?</tr>", table, flags=re.S) if ">pytorch<" in r)
    assert _cells(line)[6:] == ["1,000.0", "2,000.0", "–", "–", "–", "–", "ok"]
    assert r"& 1,000.0 & 2,000.0 & -- & -- & -- & -- \\" in (out / "tables" / "table1.tex").read_text()


def test_the_device_is_read_from_the_runs_environment():
    assert query.run_device("cuda", {"frameworks": {"torch": {"gpus": ["NVIDIA H200"]}}}) == "NVIDIA H200"
    assert query.run_device("cuda", {"nvidia": {"gpus": [{"name": "Tesla V100"}]}}) == "Tesla V100"
    assert query.run_device("ascend", {"ascend": {"npu_smi_info": "| 0  910B3 | OK |"}}) == "Ascend910B"
    assert query.run_device("ascend", {"ascend": {"npu_smi_info": "| 0  910A | OK |"}}) == "Ascend910"
    assert query.run_device("cpu", {"cpu": {"model": "x"}}) is None


def _tiny():
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return step


# forward 2*4*(8*16 + 16*2); backward: both weights' gradients and the hidden layer's input gradient
TINY_FLOPS = 2 * 4 * (8 * 16 + 16 * 2) * 2 + 2 * 4 * 16 * 2


def test_on_a_cpu_the_first_step_is_counted_and_every_later_one_profiled():
    from harness.frameworks import pytorch as pt

    step = _tiny()
    window = {"count_flops": True, "samples_per_step": 4}
    ops = pt.profile_ops(types.SimpleNamespace(platform="cpu"), lambda: [step() for _ in range(6)],
                         tempfile.mkdtemp(), window=window)
    assert window["flops_per_step"] == TINY_FLOPS and window["counted_s"] > 0
    assert ops["aten::linear"][1] == 10   # two layers, the five steps after the counted one
    assert "kernels" not in window


def test_the_cpu_profiled_pass_stores_the_count_and_leaves_the_counted_step_out(tmp_path):
    from harness import profiling
    from harness.frameworks import pytorch as pt

    step = _tiny()
    workload = types.SimpleNamespace(samples_per_epoch=12, train_epoch=lambda: [step() for _ in range(3)])
    ctx = types.SimpleNamespace(hparams={"batch": 4}, platform="cpu", cell=types.SimpleNamespace(framework="pytorch"),
                                profile_dir=str(tmp_path / "p"))
    out = profiling.profiled_epoch(ctx, pt, workload, measured_epoch_s=None)
    assert out["flops_per_sample"] == TINY_FLOPS / 4
    assert out["steps"] == 3 * out["profiled_epochs"] - 1 and out["counted_step_s"] > 0
    assert out["device"] is None
