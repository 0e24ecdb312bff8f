"""Why a ratio moves on another CPU (harness.report.explain.versus): a report of a run whose processor is not its
expected results' says, under each "Why", how each framework's profiled step moved between the two, and which
categories make most of the change."""

from __future__ import annotations

from harness.paths import REPO
from harness.report import build, explain


def _profile(step: float, **cats: float) -> dict:
    return {"step_wall_s": step, "per_step_s": cats}


def test_the_sentence_names_the_framework_that_moved_and_its_categories():
    here = {("pytorch", "eager"): _profile(0.2, matmul_dense=0.1),
            ("mindspore", "graph"): _profile(1.5, **{"loss": 0.6, "matmul/dense": 0.4,
                                                     "host and framework overhead": 0.3})}
    there = {("pytorch", "eager"): _profile(0.19, matmul_dense=0.1),
             ("mindspore", "graph"): _profile(0.5, **{"loss": 0.2, "matmul/dense": 0.2,
                                                      "host and framework overhead": 0.05})}
    s = explain.versus("GRU", here, there, "docs/runs/cpu-quick (AMD EPYC)")
    assert s.startswith("GRU: against docs/runs/cpu-quick (AMD EPYC), PyTorch eager's step 200 ms here against "
                        "190 ms there (1.05x), MindSpore GRAPH's step 1500 ms here against 500 ms there (3.00x)")
    assert s.endswith("of MindSpore GRAPH's 1000 ms more per step, 400 ms loss, 250 ms host and framework overhead "
                      "and 200 ms matmul/dense.")
    assert explain.versus("GRU", here, {}, "x") is None   # both frameworks on both hosts, or nothing


def test_a_run_on_another_cpu_says_why_against_the_expected_run_and_the_expected_run_does_not():
    data = build.collect([REPO / "docs" / "runs" / "allocator" / "tcmalloc-1"])
    gru = next(e for e in data["why"] if e["model"] == "gru")
    assert gru["versus"].startswith("GRU encoder-decoder on Multi30K English-French: against docs/runs/cpu-quick "
                                    "(AMD EPYC), PyTorch eager's step ")
    assert "of MindSpore GRAPH's " in gru["versus"]   # the framework whose step moved most on the Xeon
    expected = build.collect([REPO / "docs" / "runs" / "cpu-quick"])
    assert not any(e.get("versus") for e in expected["why"])
