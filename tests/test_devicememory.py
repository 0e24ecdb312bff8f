"""Device memory (harness.devices.memory): the device table and its headroom rule, a cell too large for the device
skipped before anything runs (the device's memory faked), `harness list` / `harness estimate` printing which cells
fit, and the committed predictions (harness/devices/devicememory.json) kept current: every model's sizes and code
against the fingerprint it was predicted for, and the CPU-side prediction re-derived and pinned to the byte for the
models that trace in seconds (GCN, the GRU, ResNet50); BERT-base's trace takes minutes on 2 cores and runs with
HARNESS_MEMORY_PIN=all."""

import json
import os
import sys
from dataclasses import replace

import pytest

from harness import cli
from harness.config.matrix import load
from harness.devices import memory as devicememory
from harness.devices import query as devicequery
from harness.errors import HarnessError
from harness.host import envinfo, platforms
from harness.launch import runner
from tests.conftest import REPO, SHARED_DATA, harness

sys.path.insert(0, str(REPO / "tools"))
try:
    import predict_memory
finally:
    sys.path.remove(str(REPO / "tools"))

BERT = "model/bert/pytorch/eager/amp-off/1dev"
BERT_MS = "model/bert/mindspore/graph/amp-O3/1dev"
GCN = "model/gcn/pytorch/eager/amp-off/1dev"
RESNET_DP = "scaling/resnet50/pytorch/eager/amp-off/2dev"
FAST = ("gcn", "gru", "resnet50")   # traced in seconds each; BERT-base in minutes (HARNESS_MEMORY_PIN=all)


def _cells():
    return {c.id: c for c in load().expand("accelerator")}


def test_the_device_table_and_the_headroom_rule():
    assert {n: d.gib for n, d in devicememory.DEVICES.items()} == {
        "V100-16": 16, "V100-32": 32, "A100-40": 40, "A100-80": 80, "H100-80": 80, "H200-141": 141, "910-32": 32,
        "910B-64": 64}
    assert all(d.source for d in devicememory.DEVICES.values())
    assert devicememory.HEADROOM == 0.9
    assert devicememory.fits(28.8, 32) and not devicememory.fits(28.81, 32)
    # Names as nvidia-smi, npu-smi and the estimate's bookings give them; the longest fragment wins.
    for name, key in (("Tesla V100-SXM2-32GB", "V100-32"), ("Tesla V100-SXM2-16GB", "V100-16"),
                      ("NVIDIA H100 80GB HBM3", "H100-80"), ("NVIDIA H200", "H200-141"), ("Ascend910", "910-32"),
                      ("Ascend910B", "910B-64"), ("A100-80", "A100-80")):
        assert devicememory.device(name).name == key, name
    with pytest.raises(HarnessError, match="no such device in the memory table; name one of: V100-16"):
        devicememory.device("Z80")


def test_a_cells_need_and_the_cells_that_borrow_it():
    cells, data = _cells(), devicememory.load()
    bert = data["models"]["bert"]
    assert devicememory.need(cells[BERT]).gib == bert["fp32"]["peak_bytes"] / 2**30
    assert devicememory.need(cells[BERT]).basis == "PyTorch eager, traced"
    ms = devicememory.need(cells[BERT_MS])   # MindSpore O3 takes PyTorch's autocast figure, labelled
    assert ms.gib == bert["amp"]["peak_bytes"] / 2**30 and ms.basis == "its PyTorch twin's figure"
    dp, one = devicememory.need(cells[RESNET_DP]), devicememory.need(cells[RESNET_DP.replace("scaling", "model")
                                                                          .replace("2dev", "1dev")])
    assert dp.gib == one.gib + data["models"]["resnet50"]["fp32"]["parts_bytes"]["parameters"] / 2**30
    assert "buckets" in dp.basis
    assert all(devicememory.need(c) is None for c in cells.values() if c.kind == "operator")


@pytest.fixture
def a_gpu_of(monkeypatch):
    """A host that shows one GPU whose memory reads as the given GiB (None: it cannot be read)."""
    def make(gib, source="faked"):
        monkeypatch.setattr(platforms, "visible_devices", lambda platform: 1)
        monkeypatch.setattr(devicequery, "host_memory", lambda platform: (gib, source))
        monkeypatch.setattr(envinfo, "capture", lambda: {})
        monkeypatch.delenv("HARNESS_NNODES", raising=False)
    return make


def _run(monkeypatch, tmp_path, only, steps=None):
    """Run the cells with their children faked; `steps` gets each started cell's accumulation steps."""
    started, steps = [], {} if steps is None else steps

    def child(store, cell, repeat, *args):
        started.append(cell.id)
        steps[cell.id] = args[-1].plan.steps   # the host's decision for the cell
        return runner._base(cell, repeat, "cuda", True) | {"status": "ok"}

    monkeypatch.setattr(runner, "_run_child", child)
    said = []
    out = tmp_path / "run"
    assert runner.run(load(), "accelerator", "cuda", out, only=only, synthetic="all", repeats=1,
                      log=said.append) == 0
    return {c: json.loads((out / "cells" / c / "r0.json").read_text()) for c in only.split(",")}, started, said


def test_a_cell_too_large_for_the_device_is_skipped_before_it_runs(a_gpu_of, monkeypatch, tmp_path, capsys):
    a_gpu_of(1.0)   # too small for BERT-base even with its batch in micro-batches of 1
    need = devicememory.need(_cells()[BERT]).gib
    one = devicememory.micro_need(_cells()[BERT], 1)
    assert one.gib > 0.9, "BERT-base's micro-batch of 1 now fits 1 GiB: pick a smaller device"
    results, started, said = _run(monkeypatch, tmp_path, f"{GCN},{BERT}")
    assert started == [GCN]                          # BERT's child was never started
    assert results[GCN]["status"] == "ok"
    skipped = results[BERT]
    assert skipped["status"] == "skipped"
    assert skipped["reason"] == (f"predicted to need {need:.1f} GiB of device memory (PyTorch eager, traced; "
                                 f"harness/devices/devicememory.json), more than 90% of this device's 1.0 GiB, and with "  # noqa: E501
                                 f"gradient accumulation even a micro-batch of 1 is predicted at {one.gib:.1f} GiB "
                                 f"({one.basis}); run it on a device of at least {one.gib / 0.9:.1f} GiB "
                                 f"({_smallest(one.gib)} or larger), in micro-batches, or with "
                                 f"HARNESS_DEVICE_MEMORY=off to try it here")
    line = next(s for s in said if s.startswith("device memory:"))
    assert line == "device memory: 1.0 GiB a device (faked); 1 cells predicted to need more than 90% of it are " \
                   "recorded as skipped (bert)"
    assert said.index(line) < next(i for i, s in enumerate(said) if "running" in s)   # said before any cell ran

    capsys.readouterr()   # `harness list` gives the same verdict, as the runner asks the same Host
    assert cli.main(["list", "--profile", "accelerator", "--platform", "cuda", "--only", f"{GCN},{BERT}",
                     "--json", "--repeats", "1"]) == 0
    listed = {r["cell"]: r["skip"] for r in json.loads(capsys.readouterr().out)}
    assert listed == {GCN: None, BERT: skipped["reason"]}


def test_a_cell_a_device_cannot_hold_whole_runs_in_micro_batches(a_gpu_of, monkeypatch, tmp_path):
    a_gpu_of(16.0)
    plan = devicememory.plan(_cells()[BERT], 16.0)
    assert plan.steps > 1, "BERT-base at fp32 now fits a V100-16 whole: pick another cell"
    steps = {}
    results, started, said = _run(monkeypatch, tmp_path, f"{GCN},{BERT}", steps)
    assert started == [GCN, BERT] and steps == {GCN: 1, BERT: plan.steps}   # what the child's spec.json says
    assert any(f"{BERT} r0: running (timeout 7200 s; batch 256 as {plan.steps} x {256 // plan.steps} accumulated)"
               in s for s in said)
    line = next(s for s in said if s.startswith("device memory:"))
    assert line == (f"device memory: 16.0 GiB a device (faked); 1 cells take their batch in micro-batches (gradient "
                    f"accumulation): bert fp32 ({plan.label}); 0 cells predicted to need more than 90% of it, even in "
                    f"micro-batches, are recorded as skipped")


def test_where_the_device_memory_cannot_be_read_nothing_is_skipped_and_a_line_says_so(a_gpu_of, monkeypatch,
                                                                                      tmp_path):
    a_gpu_of(None, "neither NVML nor nvidia-smi reported a GPU's memory")
    results, started, said = _run(monkeypatch, tmp_path, BERT)
    assert started == [BERT] and results[BERT]["status"] == "ok"
    assert ("device memory: not known (neither NVML nor nvidia-smi reported a GPU's memory); no cell is skipped for "
            "memory") in said


def test_harness_device_memory_off_skips_nothing_for_memory(a_gpu_of, monkeypatch, tmp_path):
    a_gpu_of(16.0)
    monkeypatch.setenv("HARNESS_DEVICE_MEMORY", "off")
    results, started, said = _run(monkeypatch, tmp_path, BERT)
    assert started == [BERT] and results[BERT]["status"] == "ok"
    assert "device memory: not known (HARNESS_DEVICE_MEMORY=off is set); no cell is skipped for memory" in said


def _smallest(gib):
    return next(d.name for d in sorted(devicememory.DEVICES.values(), key=lambda d: d.gib) if gib <= 0.9 * d.gib)


def test_the_host_reads_its_devices_memory_from_nvidia_smi_and_npu_smi():
    assert devicequery.nvidia_smi_gib("32768\n16384\n") == 16.0   # the smallest GPU a cell may land on
    assert devicequery.nvidia_smi_gib("") is None
    fixtures = REPO / "tests" / "fixtures" / "npusmi"
    assert devicequery.npu_smi_gib((fixtures / "910prob_info.txt").read_text()) == 32.0   # HBM, not the DDR
    assert devicequery.npu_smi_gib((fixtures / "910b3_info.txt").read_text()) == 64.0
    assert devicequery.host_memory("cpu") == (None, "no accelerator on the cpu platform")


def test_list_and_estimate_print_which_cells_fit_each_device(capsys):
    cells = _cells()
    bert_fp32 = devicememory.need(cells[BERT]).gib
    assert cli.main(["list", "--profile", "accelerator", "--platform", "cuda", "--device", "V100-16"]) == 0
    out, err = capsys.readouterr()
    plan = devicememory.plan(cells[BERT], 16.0)
    assert f"{BERT}    x1    ({plan.label}: {plan.need.gib:.1f} GiB predicted)\n" in out
    assert f"{GCN}    x2\n" in out                   # fits a V100-16; one device on that host: nothing else skips it
    table = err[err.index("device memory, predicted on the CPU"):].splitlines()
    header = table[1].split()
    assert header[:6] == ["model", "precision", "batch", "x", "seq", "devices"] and header[-8:] == list(
        devicememory.DEVICES)
    bert = next(line.split() for line in table if line.startswith("bert") and " fp32 " in line)
    assert bert[:5] == ["bert", "fp32", "256", "x", "128"] and float(bert[6]) == round(bert_fp32, 2)
    assert bert[-8:] == [f"{p.steps}x{256 // p.steps}" if (p := devicememory.plan(cells[BERT], d.gib)).steps > 1
                         else "fits" for d in devicememory.DEVICES.values()]
    assert "fits" in bert[-8:] and "SKIP" not in bert[-8:] and len(set(bert[-8:])) > 1
    assert any(line.startswith("device memory: 16.0 GiB a device (V100-16 as sold)") for line in table)

    assert cli.main(["estimate", "--device", "V100"]) == 0   # the booking: a V100 of 32 GB
    out = capsys.readouterr().out
    too_big = [c for c in cells.values() if (n := devicememory.need(c)) and n.gib > 0.9 * 32 and c.devices == 1]
    assert too_big, "nothing is too large for a V100-32 any more: the check below would prove nothing"
    label = devicememory.plan(too_big[0], 32.0).label
    assert (f"Tesla V100-SXM2-32GB: device memory: 32.0 GiB a device (V100-32 as sold); {len(too_big)} cells take "
            f"their batch in micro-batches (gradient accumulation): bert fp32 ({label}); 0 cells predicted to need "
            f"more than 90% of it, even in micro-batches, are recorded as skipped, and left out of the estimate "
            f"above") in out
    assert "device memory, predicted on the CPU" in out


@pytest.mark.parametrize("args, line", [
    (("--platform", "cuda", "--device", "Z80"),
     "error: --device 'Z80': no such device in the memory table; name one of: " + ", ".join(devicememory.DEVICES)),
    (("--device", "V100-16"), "error: --device V100-16 names a GPU or NPU; give --platform cuda or ascend with it"),
    (("--platform", "cuda", "--devices", "2"), "error: --devices 2: give it with --device NAME, and at least 1"),
])
def test_bad_device_options_are_one_line(args, line):
    p = harness("list", "--profile", "accelerator", *args)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == line


def test_the_committed_predictions_are_current():
    m = load()
    specs = {c.model: c.spec for c in m.expand("accelerator") if c.kind == "model"}
    assert set(devicememory.load()["models"]) == set(m.profile("accelerator")["models"])
    assert devicememory.stale(specs) == [], f"run `{devicememory.REGENERATE} --only MODEL`"
    # A size the trace depends on makes its model's prediction stale; a rate does not.
    bigger = replace(specs["bert"], hparams={**specs["bert"].hparams, "batch": 128})
    faster = replace(specs["gru"], hparams={**specs["gru"].hparams, "lr": 0.5})
    assert devicememory.stale({**specs, "bert": bigger, "gru": faster}) == ["bert"]


def _pinned(model):
    if model not in FAST and os.environ.get("HARNESS_MEMORY_PIN") != "all":
        pytest.skip(f"{model}'s trace takes minutes on 2 cores; HARNESS_MEMORY_PIN=all runs it")
    entry = devicememory.load()["models"][model]
    if entry["data"] == "real" and not SHARED_DATA.is_dir():
        pytest.skip(f"{model} was predicted on the real {entry['dataset']}; no real data at {SHARED_DATA}")
    return entry


@pytest.mark.parametrize("model", ["gcn", "gru", "resnet50", "bert"])
def test_the_cpu_side_prediction_is_pinned_at_the_accelerator_size(model):
    entry = _pinned(model)
    m = load()
    for prec in ("fp32", "amp"):
        cell = predict_memory.cell_of(m, model, prec)
        folder = predict_memory.data_folder(cell, SHARED_DATA if entry["data"] == "real" else None)
        got = predict_memory.trace(cell, folder, steps=entry[prec]["steps"])
        assert got["peak_bytes"] == entry[prec]["peak_bytes"], (
            f"{model} {prec}: the trace now peaks at {got['peak_bytes'] / 2**30:.3f} GiB, the committed prediction "
            f"says {entry[prec]['peak_gib']}: run `{devicememory.REGENERATE} --only {model}`")
        assert got["parts_bytes"] == entry[prec]["parts_bytes"]
        if "accumulated" in entry[prec]:   # a model that accumulates: its traces in micro-batches too
            assert predict_memory.accumulated(cell, folder, entry[prec]["steps"], log=lambda line: None) == \
                entry[prec]["accumulated"], f"run `{devicememory.REGENERATE} --only {model}`"


@pytest.mark.parametrize("model", ["gcn", "gru", "bert"])
def test_the_fake_trace_peaks_where_real_tensors_do(model):
    """The method's premise, at the quick profile's sizes (small enough for real tensors): FakeTensorMode with the
    workload's tensors made fake gives MemTracker the same peak, to the byte, as the real step."""
    cell = next(c for c in load().expand("quick") if c.id == f"model/{model}/pytorch/eager/amp-off/1dev")
    fake, real = (predict_memory.trace(cell, None, fake=f) for f in (True, False))
    assert fake["peak_bytes"] == real["peak_bytes"] > 0
    assert fake["parts_bytes"] == real["parts_bytes"]


def test_the_fake_trace_of_a_step_in_micro_batches_peaks_where_real_tensors_do():
    """The same premise with the batch in two micro-batches (what the accumulated predictions trace): the gradients'
    sums are alive at the peak, a micro-batch's activations with them."""
    cell = next(c for c in load().expand("quick") if c.id == BERT)
    fake, real = (predict_memory.trace(cell, None, fake=f, accumulation_steps=2) for f in (True, False))
    assert fake["peak_bytes"] == real["peak_bytes"] > 0 and fake["parts_bytes"] == real["parts_bytes"]
    assert fake["parts_bytes"]["gradients"] == fake["parts_bytes"]["parameters"]
