"""Why each verdict: the operator categories (one vocabulary for both frameworks, harness/profiling/categories.toml),
their coverage of the ops the quick profile's cells run, the per-step arithmetic and the sentence the report prints."""

import json
from pathlib import Path

import pytest

from harness import profiling
from harness.frameworks import mindspore as ms_backend
from harness.frameworks import pytorch as pt_backend
from harness.report import explain

FIXTURE = Path(__file__).parent / "fixtures" / "profile_ops_quick.json"
# The ops a profiled pass ran on an NVIDIA H200 (PyTorch 2.11, cuDNN 9.19): ResNet50, the GRU and GCN at fp32.
CUDA_FIXTURE = Path(__file__).parent / "fixtures" / "profile_ops_cuda.json"


def _cells():
    return [(f"{name}/{cell}", seen) for name, path in (("cpu", FIXTURE), ("cuda", CUDA_FIXTURE))
            for cell, seen in json.loads(path.read_text()).items()]


def test_every_rule_names_a_category_of_the_vocabulary():
    profiling._rules.cache_clear()
    rules = profiling._rules()
    assert {fw for fw, _ in rules} == {"pytorch", "mindspore", "host", "device"}
    assert all(c in profiling.CATEGORIES for pats in rules.values() for _, c in pats)


@pytest.mark.parametrize("cell, seen", _cells(), ids=[c for c, _ in _cells()])
def test_every_op_of_the_quick_profile_has_a_category_and_other_stays_small(cell, seen):
    """The ops each quick cell's profiled epoch ran (tools/profile_ops.py on a quick run): none falls through every
    rule, and the ops filed as "other" hold at most OTHER_LIMIT of the step."""
    fw = seen["framework"]
    seen = {**seen, "ops": {op: v for op, v in seen["ops"].items() if not profiling.host_call(op)}}
    missing = sorted(op for op in seen["ops"] if profiling.categorise(fw, op, strict=True) is None)
    assert not missing, f"{cell}: ops with no category in categories.toml: {missing}"
    other = sum(share for op, share in seen["ops"].items() if profiling.categorise(fw, op) == "other")
    assert other <= profiling.OTHER_LIMIT, f"{cell}: 'other' is {other:.1%} of a step"


def test_the_backends_declare_which_modes_they_profile():
    assert pt_backend.PROFILED_MODES == ("eager",)            # torch.compile's generated kernels name no op
    assert set(ms_backend.PROFILED_MODES) == {"graph", "pynative"}


@pytest.mark.parametrize("fw, op, category", [
    ("pytorch", "aten::dropout", "dropout/random"), ("pytorch", "aten::bernoulli_", "dropout/random"),
    ("pytorch", "Optimizer.step#Adam.step", "optimizer update"), ("pytorch", "aten::mkldnn_convolution", "convolution"),
    ("pytorch", "autograd::engine::evaluate_function: ConvolutionBackward0", "convolution"),
    ("mindspore", "Dropout", "dropout/random"), ("mindspore", "drop0-Dropout/Dropout", "dropout/random"),
    ("mindspore", "network-LossCell/ReduceMax", "loss"), ("mindspore", "Conv2D", "convolution"),
    ("mindspore", "Tile", "copy/cast/layout"),
    ("mindspore", "no-such-op", "other")])
def test_op_names_map_to_their_category(fw, op, category):
    assert profiling.categorise(fw, op) == category


def test_a_loss_cell_is_no_scope_but_the_ops_it_computes_itself_are_loss():
    assert profiling.scope("mindspore", "network-LossCell/") is None   # its net's ops keep their own categories
    assert profiling.scope("mindspore", "network-LossCell/Exp") == "loss"


def test_a_step_is_its_ops_self_times_plus_the_overhead():
    ops = {"aten::dropout": (0.100, 2), "aten::mm": (0.040, 14), "aten::copy_": (0.004, 40)}
    s = profiling.summarise("pytorch", ops, steps=2, step_wall_s=0.080)
    assert s["per_step_s"]["dropout/random"] == pytest.approx(0.050)
    assert s["per_step_s"]["matmul/dense"] == pytest.approx(0.020)
    assert s["per_step_s"]["copy/cast/layout"] == pytest.approx(0.002)
    assert s["per_step_s"][profiling.OVERHEAD] == pytest.approx(0.008)
    assert sum(s["per_step_s"].values()) == pytest.approx(0.080)
    assert s["top_ops"][0] == {"op": "aten::dropout", "category": "dropout/random", "self_s_per_step": 0.05,
                               "calls_per_step": 1.0}


def test_a_slower_profiled_step_gives_shares_and_the_measured_step_gives_times():
    """The profiled step took 100 ms, the measured one 80: dropout's 50 ms of self time is half the step, 40 ms of
    the measured one; the categories and the overhead add up to the measured step."""
    ops = {"aten::dropout": (0.100, 2), "aten::mm": (0.040, 14)}
    s = profiling.summarise("pytorch", ops, steps=2, step_wall_s=0.080, profiled_step_s=0.100)
    assert s["share"]["dropout/random"] == pytest.approx(0.5)
    assert s["per_step_s"]["dropout/random"] == pytest.approx(0.040)
    assert s["per_step_s"][profiling.OVERHEAD] == pytest.approx(0.080 * 0.3)
    assert s["self_s"]["dropout/random"] == pytest.approx(0.050)
    assert sum(s["per_step_s"].values()) == pytest.approx(0.080)
    # Self times past the profiled wall time (ops on several threads): shares of their sum, no overhead.
    s = profiling.summarise("mindspore", {"MatMul": (0.3, 2), "Dropout": (0.1, 2)}, 2, 0.150, profiled_step_s=0.150)
    assert s["share"]["matmul/dense"] == pytest.approx(0.75) and s["share"][profiling.OVERHEAD] == 0
    assert sum(s["per_step_s"].values()) == pytest.approx(0.150)


def _profile(per_step_ms: dict, wall_ms: float) -> dict:
    cats = dict.fromkeys((*profiling.CATEGORIES, profiling.OVERHEAD), 0.0)
    return {"per_step_s": cats | {c: v / 1000 for c, v in per_step_ms.items()}, "step_wall_s": wall_ms / 1000}


def test_the_sentence_names_the_categories_that_make_the_difference():
    pt = _profile({"dropout/random": 50, "matmul/dense": 10, profiling.OVERHEAD: 7}, 67)
    ms = _profile({"dropout/random": 13, "matmul/dense": 8, profiling.OVERHEAD: 2}, 23)
    assert explain.sentence("cpu", "GCN on Cora", pt, ms) == (
        "GCN on Cora, cpu: of the 44 ms per step by which PyTorch eager is slower than MindSpore GRAPH (67 ms against "
        "23 ms), 37 ms is dropout/random.")
    slower_ms = explain.sentence("cpu", "GRU on Multi30K", ms, pt)
    assert "by which MindSpore GRAPH is slower than PyTorch eager (67 ms against 23 ms)" in slower_ms
    assert "37 ms is dropout/random" in slower_ms
    assert explain.sentence("cpu", "GCN on Cora", pt, None) is None
    assert explain._short("GCN (Kipf & Welling) on Cora") == "GCN on Cora"


def test_the_sentence_says_what_goes_the_other_way():
    pt = _profile({"dropout/random": 64, "matmul/dense": 5, profiling.OVERHEAD: 2}, 71)
    ms = _profile({"dropout/random": 9, "matmul/dense": 4, profiling.OVERHEAD: 15}, 28)
    assert explain.sentence("cpu", "GCN on Cora", pt, ms) == (
        "GCN on Cora, cpu: of the 43 ms per step by which PyTorch eager is slower than MindSpore GRAPH (71 ms against "
        "28 ms), 55 ms is dropout/random, while MindSpore GRAPH spends 13 ms more on host and framework overhead.")


def test_a_failing_profiler_is_recorded_and_never_fails_the_cell():
    def broken():
        raise RuntimeError("profiler gone")

    out = {"status": "ok", profiling.AFTER: broken}
    profiling.run_after(out)
    assert out == {"status": "ok", "profile": {"error": "RuntimeError: profiler gone"}}
    skipped = {"status": "skipped", profiling.AFTER: broken}
    profiling.run_after(skipped)
    assert "profile" not in skipped and profiling.AFTER not in skipped


def test_the_profilers_output_is_kept_under_its_bound(tmp_path):
    (tmp_path / "a" / "FRAMEWORK").mkdir(parents=True)
    (tmp_path / "a" / "FRAMEWORK" / "ops.csv").write_bytes(b"x" * 1000)
    (tmp_path / "a" / "trace.json").write_bytes(b"x" * (profiling.RAW_LIMIT_BYTES + 1))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "big.json").write_bytes(b"x" * (profiling.RAW_LIMIT_BYTES + 1))
    kept = profiling._bound(str(tmp_path))
    assert kept == ["a/FRAMEWORK/ops.csv"]
    assert not (tmp_path / "b").exists() and not (tmp_path / "a" / "trace.json").exists()
