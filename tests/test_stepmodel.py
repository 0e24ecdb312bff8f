"""The estimate from measured step times (harness.estimate.stepmodel), the accelerator profile's order and sizes, and
the progress line's estimate kept current per cell."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import profiling
from harness.claims.paper import BASELINE
from harness.config import matrix
from harness.estimate import devicescale, stepmodel
from harness.launch.progress import RunProgress
from harness.results.store import RunStore, write_json_atomic

RESNET = "model/resnet50/pytorch/eager/amp-off/1dev"


def _result(cell, amp="off", *, first=19.0, later=(1.0,), samples=5000, wall_extra=6.0, elapsed_extra=26.0,
            reached=True, busy=None):
    epochs = [{"epoch": 0, "samples": samples, "train_s": first}] + [
        {"epoch": i + 1, "samples": samples, "train_s": t} for i, t in enumerate(later)]
    train = sum(e["train_s"] for e in epochs)
    r = {"schema": 2, "cell": cell, "repeat": 0, "status": "ok", "kind": "model", "model": "resnet50",
         "framework": "pytorch", "mode": "eager", "amp": amp, "devices": 1, "epochs": epochs,
         "wall_s": train + wall_extra, "elapsed_s": train + wall_extra + elapsed_extra,
         "best_metric": 0.9 if reached else 0.5, "target": 0.85, "time_to_target_s": 10.0 if reached else None}
    if busy is not None:
        r["profile"] = {"device": {"measured_busy_share": busy}}
    return r


@pytest.fixture
def reference(tmp_path):
    ref = tmp_path / "cuda-accelerator"
    store = RunStore(ref)
    store.write_result(RESNET, 0, _result(RESNET, busy=0.25))
    write_json_atomic(ref / "run.json", {"schema": 2, "platform": "cuda", "profile": "accelerator",
                                         "synthetic": "cifar10", "invocations": []})
    write_json_atomic(ref / "env.json", {"frameworks": {"torch": {"gpus": ["NVIDIA H200"]}}})
    return ref


def _cells():
    return {c.id: c for c in matrix.load().expand("accelerator")}


def test_a_measured_cell_takes_its_own_time_and_its_parts_add_up_to_it(reference):
    d = stepmodel.donors(reference)[RESNET]
    # 19 s first epoch of 5,000 samples, then 1 s an epoch: the first epoch's excess is 18 s.
    assert d.per_sample_s == pytest.approx(1 / 5000) and d.first_s == pytest.approx(18.0)
    assert d.eval_s == pytest.approx(3.0) and d.fixed_s == pytest.approx(26.0) and d.busy == 0.25
    cell = _cells()[RESNET]
    assert stepmodel.seconds(cell, d, synthetic=True, donor_synthetic=True) == pytest.approx(d.elapsed_s)


def test_real_data_scales_to_the_real_split_and_the_planned_epochs(reference):
    """A donor run on the synthetic stand-in (5,000 images, stopped at its target after 2 epochs) predicts a run on the
    real 50,000 images: at most the planned 30 epochs, each 10 times as long."""
    d = stepmodel.donors(reference)[RESNET]
    cell = _cells()[RESNET]
    assert cell.spec.epochs == 30 and cell.spec.stop_at_target
    got = stepmodel.seconds(cell, d, synthetic=False, donor_synthetic=True)
    assert got == pytest.approx(26.0 + 18.0 + 30 * 49920 / 5000 + 30 * 3.0)


def test_another_device_scales_only_the_device_part_of_a_host_bound_step(reference):
    d = stepmodel.donors(reference)[RESNET]
    f = devicescale.peak_ratio("NVIDIA H200", "Tesla V100-SXM2-32GB", "fp32")
    assert f == pytest.approx(67 / 15.7)
    cell = _cells()[RESNET]
    same = stepmodel.seconds(cell, d, synthetic=True, donor_synthetic=True)
    slower = stepmodel.seconds(cell, d, f, synthetic=True, donor_synthetic=True)
    train = 2 * 5000 * d.per_sample_s   # the donor's 2 epochs at the later pace
    # busy 25% of the step: on a device 4.27 times slower the step takes max(1, 0.25 * 4.27) = 1.07 times as long.
    assert slower == pytest.approx(26.0 + f * 18.0 + train * max(1.0, 0.25 * f) + f * 2 * 3.0)
    assert same < slower
    assert devicescale.peak_ratio("NVIDIA H200", "Ascend910", "fp32") == pytest.approx(989 / 256)   # fp16's
    # A factor the two devices measured for the whole step scales the host's part too; MindSpore's ratio to PyTorch
    # (harness.estimate.frameworkratio) scales the training steps alone.
    whole = stepmodel.seconds(cell, d, 1.2, synthetic=True, donor_synthetic=True, whole_step=True)
    assert whole == pytest.approx(26.0 + 1.2 * 18.0 + train * 1.2 + 1.2 * 2 * 3.0)
    ms = stepmodel.seconds(cell, d, synthetic=True, donor_synthetic=True, framework_ratio=2.5)
    assert ms == pytest.approx(26.0 + 18.0 + train * 2.5 + 2 * 3.0)


def test_an_unmeasured_setting_takes_the_nearest_donor(reference):
    pool = stepmodel.donors(reference)
    cells = _cells()
    ms = cells["model/resnet50/mindspore/graph/amp-off/1dev"]
    donor, how = stepmodel.pick(ms, pool)
    assert donor.cell == RESNET and how == "like"
    amp = cells["model/resnet50/mindspore/graph/amp-O2/1dev"]
    assert stepmodel.pick(amp, pool)[1] == "model"
    assert stepmodel.pick(cells["model/gru/pytorch/eager/amp-off/1dev"], pool) == (None, "none")


def test_the_accelerator_profile_runs_the_claims_cells_first_and_sizes_the_others_for_throughput():
    cells = matrix.load().expand("accelerator")
    kinds = [c.kind for c in cells]
    first = [c for c in cells if c.kind == "model" and matrix.compared(c)]
    assert cells[:len(first)] == first                         # C1-C4's cells lead
    assert kinds.index("scaling") > kinds.index("model") and kinds.index("operator") > kinds.index("scaling")
    by_id = {c.id: c for c in cells}
    for fw, (mode, amp) in BASELINE.items():   # the time-to-target cells train to the target
        spec = by_id[f"model/resnet50/{fw}/{mode}/amp-{amp}/1dev"].spec
        assert spec.stop_at_target and spec.epochs == 30
    other = by_id["model/resnet50/pytorch/eager/amp-O2/1dev"].spec
    assert not other.stop_at_target and other.epochs == 3
    assert by_id["model/bert/pytorch/eager/amp-off/1dev"].spec.hparams["hidden"] == 768


def test_the_progress_line_keeps_the_estimate_current():
    clock = iter([0.0, 20.0, 20.0, 40.0]).__next__
    p = RunProgress(3, clock=clock, planned=[10.0, 10.0, 20.0])
    line = p.finished(20.0)                     # twice its estimate: what is left doubles
    assert "about 1 min 00 s left by the estimate" in line and "2.00x" in line
    assert "about 40 s left by the estimate" in p.finished(None)   # a kept or skipped run: no new evidence
    assert "left" not in p.finished(20.0)


def test_another_matrix_order_is_refused(tmp_path):
    text = matrix.DEFAULT_MATRIX.read_text().replace('order = "claims-first"', 'order = "alphabetical"')
    path = tmp_path / "m.toml"
    path.write_text(text)
    from harness.errors import HarnessError
    with pytest.raises(HarnessError, match="order"):
        matrix.load(path)


def test_a_synthetic_reference_is_read_from_its_run_json(reference):
    from harness.config.cell import Cell
    from harness.estimate import runtime as estimate

    cell = replace(_cells()[RESNET], repeats=1)
    assert isinstance(cell, Cell)
    p = estimate.plan([(cell, 0)], reference, synthetic={"cifar10"})
    assert p["how"][RESNET] == "measured" and p["cells"] == pytest.approx(stepmodel.donors(reference)[RESNET].elapsed_s)


def test_cudnn_autotunes_only_where_the_epochs_after_the_first_win_it_back():
    """On a GPU cuDNN's autotuning is most of a first epoch: the quick profile's few-step cells leave it off, the
    accelerator profile's (hundreds of steps after the first epoch) keep it on."""
    from harness.frameworks.pytorch import autotune_pays

    m = matrix.load()
    for profile, want in (("quick", False), ("accelerator", True)):
        c = next(c for c in m.expand(profile) if c.id == RESNET)
        assert autotune_pays(c.spec, c.spec.hparams) is want


def test_a_quick_cell_on_a_device_drops_the_donors_autotuning_and_whole_epoch_profiled_pass(tmp_path):
    """The quick cells on a GPU neither autotune nor profile whole epochs any more: a donor measured with both (the
    H200's quick run) predicts a cell without its first epoch's extra time and with a window of a few profiled steps."""
    from harness.profiling import DEVICE_STEPS, DEVICE_WARMUP

    ref = tmp_path / "cuda-quick"
    r = _result(RESNET, first=16.5, later=(0.05,), samples=16)
    r["settings"] = {"cudnn.benchmark": True}
    r["profile"] = {"steps": 26, "profiled_step_s": 0.04}
    RunStore(ref).write_result(RESNET, 0, r)
    write_json_atomic(ref / "run.json", {"schema": 2, "platform": "cuda", "profile": "quick", "invocations": []})
    d = stepmodel.donors(ref)[RESNET]
    assert d.autotuned and d.pass_s == pytest.approx(26 * 0.04)
    cell = next(c for c in matrix.load().expand("quick") if c.id == RESNET)
    later = stepmodel.seconds(cell, d, on_device=True)
    # two epochs of the quick profile's 32 images, no autotuning
    assert later == pytest.approx(d.fixed_s - d.pass_s + 2 * 32 * d.per_sample_s + 2 * d.eval_s)
    steps = -(-(2 + DEVICE_WARMUP + DEVICE_STEPS) // 1) * 1   # one step an epoch at batch 16
    first = stepmodel.seconds(cell, d, profiled=True, on_device=True)
    assert first - later == pytest.approx(min(d.pass_s, steps * 0.04 + stepmodel.PROFILER_START_S))
    assert profiling.runs_pass(cell, 0) and not profiling.runs_pass(cell, 1)
