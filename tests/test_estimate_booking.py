"""`harness estimate` for a booking says what it rests on: a range from the planned repeats (MindSpore at each model's
smallest CPU ratio to PyTorch) to every comparison at the profile's max_repeats (at the largest), the cells a device
cannot hold left out as the run leaves them out, the device factor from the two devices' own measurements where both
have them and else by the stated rule (harness.estimate.devicescale), MindSpore priced from its CPU ratio to PyTorch
and said to be a weak proxy (harness.estimate.frameworkratio), per model how many cells rest on a measured cell of the
same model, precision and device kind, and, on their own lines, what the booking costs besides the cells."""

import json
from functools import cache

import pytest

from harness import cli
from harness.config import matrix as matrix_mod
from harness.devices import memory as devicememory
from harness.devices.catalog import kind
from harness.estimate import booking, devicescale, frameworkratio, stepmodel
from harness.estimate import runtime as estimate
from tests.conftest import REPO

H100, H200, V100 = "NVIDIA H100 80GB HBM3", "NVIDIA H200", "Tesla V100-SXM2-32GB"


@cache
def _project(device, memory=None):
    m = matrix_mod.load()
    folders, _ = estimate.references("cuda", "accelerator")
    return booking.project(m, "accelerator", "cuda", run=folders, device=device, devices=1,
                           memory=memory or devicememory.table_gib(device or H200))


def test_a_v100_16_leaves_out_the_cells_it_cannot_hold_and_gives_a_range():
    big = _project("Tesla V100-SXM2-16GB", devicememory.table_gib("V100-16"))
    none = _project("Tesla V100-SXM2-16GB", (None, "not read"))
    cells = matrix_mod.load().expand("accelerator")
    # the runs of the one-device cells predicted too big for 16 GB: the run skips them, so does the estimate
    left_out = sum(c.repeats for c in cells if c.devices == 1 and devicememory.too_big(c, 16.0))
    assert big["skipped"] - none["skipped"] == left_out
    # each cell's decision, asked once, is the one the memory rule makes (the docs' "left out" column reads it)
    assert {cid for cid, d in big["decisions"].items() if d.plan.skip} == {c.id for c in cells
                                                                           if devicememory.too_big(c, 16.0)}
    assert big["total_s"] < none["total_s"] or left_out == 0
    assert big["low_s"] <= big["total_s"] < big["upper_s"]      # the profile caps its repeats at 3, plans 2
    assert big["cap"] == matrix_mod.load().max_repeats("accelerator", None, None)


def test_the_h100_is_scaled_from_its_own_measurements_and_no_longer_priced_as_the_h200():
    h100, h200 = _project(H100), _project(H200)
    assert h100["total_s"] != h200["total_s"]
    assert h200["device_basis"] == f"on the device the runs measured ({H200}): not scaled"
    # The factor is the ratio of the two committed reference_gap runs' reference loops, read here from the files.
    rows = {}
    for name, path in devicescale.MEASURED:
        for r in json.loads((REPO / path).read_text())["rows"]:
            rows[kind(name), r["model"], r["amp"]] = r["reference"]
    s = devicescale.scale(H200, H100, "resnet50", "fp32")
    assert s.how == "measured" and s.whole_step
    assert s.factor == pytest.approx(rows["H200", "resnet50", "off"] / rows["H100", "resnet50", "off"])
    assert f"resnet50 fp32 {s.factor:.2f}x" in h100["device_basis"]
    assert "one round each" in h100["device_basis"]
    # A model neither card measured is scaled by the stated rule: the same peaks, so the bandwidths (3.35 vs 4.8 TB/s).
    gcn = devicescale.scale(H200, H100, "gcn", "fp32")
    assert (gcn.how, gcn.whole_step) == ("bandwidth", False) and gcn.factor == pytest.approx(4.8 / 3.35)
    assert f"gcn fp32 {gcn.factor:.2f}x (bandwidth)" in h100["device_basis"]


def test_the_stated_rule_takes_the_slower_of_the_peak_and_the_bandwidth_ratio():
    fp32, fp16 = (devicescale.scale(H200, V100, "resnet50", p) for p in ("fp32", "fp16"))
    assert (fp32.how, fp32.factor) == ("bandwidth", pytest.approx(4.8e12 / 900e9))   # 5.33 over the peaks' 4.27
    assert (fp16.how, fp16.factor) == ("peak", pytest.approx(989 / 125))             # 7.91 over the bandwidths'
    ascend = devicescale.scale(H200, "Ascend910", "resnet50", "fp32")                # no bandwidth, no FP32 figure
    assert (ascend.how, ascend.factor) == ("peak", pytest.approx(989 / 256))
    assert devicescale.scale(H200, "H200", "resnet50", "fp32").how == "same"          # a kind, not a string
    assert kind(H100) == "H100" and kind("NVIDIA H100 PCIe") == "H100 PCIe" and kind("Ascend910B") == "Ascend910B"


def test_mindspore_is_priced_from_its_cpu_ratio_and_the_range_widens():
    p = _project(H200)
    ratios = p["ratios"]
    # Each ratio is MindSpore's steady seconds per sample over PyTorch eager's in the same committed CPU run.
    by_run = {}
    for run in ("cpu-quick", "cpu-target"):
        pool = stepmodel.donors(REPO / "docs" / "runs" / run)
        ms, pt = (pool[f"model/gru/{fw}/amp-off/1dev"] for fw in ("mindspore/graph", "pytorch/eager"))
        by_run[run] = ms.per_sample_s / pt.per_sample_s
        assert next(r.ratio for r in ratios.found if r.run == run and r.cell == ms.cell) == pytest.approx(by_run[run])
    # a cell of a model, mode and AMP level two runs measured: their median
    assert ratios.central("gru", "graph", "off") == pytest.approx(sum(by_run.values()) / 2)
    assert ratios.central("gru", "graph", "O3") == ratios.central("gru", "graph", "off")   # not measured: its mode's
    assert set(ratios.runs()) == {"cpu-quick", "cpu-target"}
    lo, hi = ratios.spread("gru")
    assert lo < hi
    assert p["low_s"] < p["total_s"] < p["upper_s"]
    # Without the ratios (every MindSpore cell at PyTorch's times) the estimate is another.
    folders, _ = estimate.references("cuda", "accelerator")
    todo = [(c, 0) for c in matrix_mod.load().expand("accelerator") if c.model == "gru"]
    bare = stepmodel.plan(todo, stepmodel.donors(folders))
    priced = estimate.plan(todo, folders)["estimate"]
    assert priced.total_s > bare.total_s and all(c.framework == frameworkratio.PRICED for c, _ in todo
                                                 if c.id in priced.ratio)


def test_the_printed_estimate_names_its_basis_and_what_is_not_in_it(capsys):
    assert cli.main(["estimate", "--device", "V100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("    range: ") and "max_repeats (3)" in out[1]
    assert any(line.startswith("    MindSpore priced from its CPU ratio to PyTorch (bert: ") for line in out)
    assert "    a CPU ratio is a weak proxy for a GPU's or an NPU's" in "\n".join(out)
    assert any(line.startswith(f"    device: scaled from {H200} to {V100} by the stated rule") for line in out)
    bert = next(line for line in out if line.strip().startswith("bert ") and "rest on a measured cell" in line)
    assert bert.strip().startswith("bert         0 of its ") and f"on one measured on {H200}, scaled" in bert
    extra = [line.strip() for line in out if line.strip().startswith("not in the total: ")]
    assert any(line.startswith("not in the total: the image build: ") for line in extra)
    assert any("5.3 GB of wheels" in line for line in extra)
    assert any("MindSpore's first run on an H100" in line for line in extra)


def test_per_model_the_cells_on_a_measured_cell_of_the_same_model_precision_and_device_kind():
    on_h200, on_h100 = _project(H200)["per_model"], _project(H100)["per_model"]
    for model in ("gcn", "gru", "resnet50"):   # measured on the H200 at both precisions (docs/runs/cuda-*)
        assert on_h200[model]["here"] == on_h200[model]["cells"] > on_h200[model]["own"] > 0
        assert on_h100[model]["here"] == 0 and on_h100[model]["scaled"] == on_h100[model]["cells"]
        assert on_h100[model]["kinds"] == {H200}
    bert = on_h200["bert"]      # its fp32 cell failed on the H200: its fp32 cells rest on less
    assert bert["here"] + bert["less"] == bert["cells"] and bert["less"] > 0


def test_the_cells_a_device_takes_in_micro_batches_are_named_as_priced_at_whole_batches():
    small = _project("Tesla V100-SXM2-16GB", devicememory.table_gib("V100-16"))
    big = _project(H100)
    assert small["accumulated"] and all("accumulated" in a for a in small["accumulated"])
    assert big["accumulated"] == []
    lines = booking.projection_lines(small, estimate.references("cuda", "accelerator")[0])
    assert any(line.startswith("    priced at the whole batch's step time: ") for line in lines)
