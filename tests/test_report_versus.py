"""Why a ratio moves on another CPU (harness.report.explain.versus): a report says, under each "Why", how each
framework's profiled step moved between its host and the committed run on another processor, and which categories
make most of the change. And which committed run a host is compared with: the nearest CPU's (harness.paths)."""

from __future__ import annotations

import json

import pytest

from harness import paths
from harness.host import configdiff
from harness.paths import REPO, RUNS
from harness.preflight import host as preflight_host
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
    # The AMD EPYC's run against the nearest other processor's, the Intel Xeon's whole quick run, and back.
    epyc = next(e for e in build.collect([RUNS / "cpu-quick"])["why"] if e["model"] == "gru")
    assert epyc["versus"].startswith("GRU encoder-decoder on Multi30K English-French: against docs/runs/"
                                     "cpu-quick-intel-xeon (Intel(R) Xeon(R) Processor")
    xeon = next(e for e in build.collect([RUNS / "cpu-quick-intel-xeon"])["why"] if e["model"] == "gru")
    assert xeon["versus"].startswith("GRU encoder-decoder on Multi30K English-French: against docs/runs/cpu-quick "
                                     "(AMD EPYC), PyTorch eager's step ")


@pytest.mark.parametrize("model, family", [
    ("Intel(R) Xeon(R) Processor @ 2.50GHz", "Intel Xeon"), ("Intel(R) Xeon(R) Processor", "Intel Xeon"),
    ("AMD EPYC", "AMD EPYC"), ("AMD EPYC 7B13 64-Core Processor", "AMD EPYC"),
    ("Intel(R) Core(TM) i7-1165G7 @ 2.80GHz", "Intel Core"), ("", "unknown CPU"), (None, "unknown CPU")])
def test_a_cpu_model_reduces_to_its_family(model, family):
    assert paths.cpu_family(model) == family


@pytest.mark.parametrize("cpu, run", [
    ("Intel(R) Xeon(R) Processor @ 2.50GHz", "cpu-quick-intel-xeon"),   # the same family
    ("Intel(R) Core(TM) i7-1165G7 @ 2.80GHz", "cpu-quick-intel-xeon"),   # the same vendor, the nearest measured
    ("AMD EPYC 9654 96-Core Processor", "cpu-quick"),
    ("Neoverse-N1", "cpu-quick"), (None, "cpu-quick")])                    # none nearer: the reference run
def test_a_host_is_compared_with_the_run_of_the_nearest_cpu(cpu, run):
    assert paths.expected_run("cpu", "quick", cpu) == RUNS / run
    assert paths.expected_run("cpu", "target", cpu) == RUNS / "cpu-target"   # one CPU measured: that one
    assert paths.expected_run("cpu", "nonesuch", cpu) is None
    # --check's rows read the same run (its CPU, allocators and largest cell)
    assert (preflight_host.expected_run_facts(cpu=cpu) or {}).get("name") == run


def test_the_banner_names_the_run_it_compares_with(tmp_path):
    """An Intel host without tcmalloc: its banner compares with the Intel Xeon's run, and names it."""
    meta = {"platform": "cpu", "profile": "quick", "synthetic": "cifar10"}
    env = json.loads((RUNS / "cpu-quick-intel-xeon" / "env.json").read_text())
    assert configdiff.expected_for(meta, env) == RUNS / "cpu-quick-intel-xeon"
    assert not [d for d in _diffs(meta, env) if d["what"] == "CPU"]
    xeon = env["cpu"]["model"]
    env["cpu"]["model"] = "AMD EPYC"
    assert configdiff.expected_for(meta, env) == RUNS / "cpu-quick"
    assert not [d for d in _diffs(meta, env) if d["what"] == "CPU"]
    env["cpu"]["model"] = "Intel(R) Core(TM) i7-1165G7 @ 2.80GHz"   # a laptop: the Xeon's run, the CPU named
    assert [d["expected"] for d in _diffs(meta, env) if d["what"] == "CPU"] == [xeon]
    h = {"meta": meta, "env": env, "expected": configdiff.expected_for(meta, env)}
    assert build._expected_name(h) == "docs/runs/cpu-quick-intel-xeon"


def _diffs(meta: dict, env: dict) -> list[dict]:
    """The banner's differences, from the expected run found as the report finds it (configdiff.expected_for)."""
    return configdiff.differences(meta, env, configdiff.expected_for(meta, env))
