"""The host's noise, read from a sweep's turn groups (harness.results.hostnoise): a group taken in a contended stretch
is left out of its configuration's ratio and counted, the precision rule replaces it, and a configuration's interval
assumes at least the run's spread between groups."""

import math

import numpy as np
import pytest
from scipy import stats

from harness.claims.operators import paired_ratios
from harness.results import hostnoise, measure

RECORD = {"kind": "operator", "status": "ok", "op": "linear", "dtype": "fp32", "direction": "fwd", "params": 100,
          "platform": "cpu"}


def _results(batch: int, ms_factors: list[float], probes_us: list[float]) -> list[dict]:
    """One configuration's turn groups: MindSpore's blocks `ms_factors[k]` x 2 ms in group k, PyTorch's 1 ms, every
    block of both processes of group k after a 4 MiB read of probes_us[k] us."""
    out = []
    for k, (f, p) in enumerate(zip(ms_factors, probes_us, strict=True)):
        for fw, mode, t in (("mindspore", "graph", 0.002 * f), ("pytorch", "eager", 0.001)):
            times = [t] * 24
            out.append({**RECORD, "shape": {"batch": batch}, "framework": fw, "mode": mode, "repeat": k,
                        "cell": f"operator/linear/{fw}/{mode}/fp32/fwd/batch{batch}", "block_times_s": times,
                        "fast_s": t, "median_s": t, "throughput": batch / t, "probe_s": [p * 1e-6] * 24,
                        "turns": {"group": f"b{batch}-g{k}", "position": 0, "cells": 2, "rounds": 24}})
    return out


def _configs(results: list[dict]) -> dict[int, measure.OpConfig]:
    return {c.shape["batch"]: c for c in measure.operator_ratios(measure.summarise(results))}


def test_a_group_taken_in_a_contended_stretch_is_left_out_of_its_ratio_and_counted():
    # batch 64: its second group's processes read 4 MiB in 260 us against the run's quiet 179.5 (the 25th percentile
    # of its groups; over CONTENDED x that) and MindSpore ran 1.4x slower in it; batch 128's groups all quiet
    results = _results(64, [1.0, 1.4, 1.01, 0.99], [180, 260, 182, 178]) + _results(128, [1.0, 1.02, 0.98],
                                                                                    [179, 181, 183])
    c = _configs(results)
    assert c[64].host.probe_limit_s == pytest.approx(hostnoise.CONTENDED * np.percentile([180, 260, 182, 178, 179, 181,
                                                                                          183], 25) * 1e-6)
    assert c[64].left_out("graph") == 1 and c[128].left_out("graph") == 0
    kept = np.log([0.5 / 1.0, 0.5 / 1.01, 0.5 / 0.99])
    assert c[64].ratio("graph") == pytest.approx(math.exp(kept.mean())), "the contended group left out"
    (o64,) = [o for o in paired_ratios(measure.summarise(results)) if o.shape["batch"] == 64]
    assert o64.groups == 3, "the precision rule counts the groups kept"
    # a run that was contended all along is its own measure: the same stretch read as the median leaves nothing out
    loud = _configs(_results(64, [1.0, 1.4, 1.01], [260, 261, 259]))
    assert loud[64].left_out("graph") == 0
    # nor is a configuration whose every group was contended left without a ratio
    one = _configs(_results(64, [1.4, 1.45], [400, 420]) + _results(128, [1.0, 1.0, 1.0, 1.0], [180] * 4))
    assert one[64].left_out("graph") == 0 and one[64].ratio("graph") is not None


def test_a_configurations_interval_assumes_at_least_the_runs_spread_between_groups():
    # batch 64's three groups agree exactly (a spread of 0 by chance), batch 128's spread about 4%, batch 256's about
    # 2%: the run's spread is the median of the three, batch 256's, and batch 64's interval Student's t (2 degrees of
    # freedom) over it, not a point
    f128, f256 = [1.0, 1.04, 0.96, 1.0], [1.0, 1.02, 0.98]
    results = _results(64, [1.0, 1.0, 1.0], [180] * 3) + _results(128, f128, [180] * 4) + _results(256, f256, [180] * 3)
    c = _configs(results)
    logs128, logs256 = np.log(0.5 / np.array(f128)), np.log(0.5 / np.array(f256))
    run = logs256.std(ddof=1)
    assert c[64].host.spread["graph"] == pytest.approx(run)
    lo, hi = c[64].ratio_interval("graph")
    half = stats.t.ppf(0.975, 2) * run / math.sqrt(3)
    assert (lo, hi) == (pytest.approx(0.5 * math.exp(-half), rel=0.005), pytest.approx(0.5 * math.exp(half), rel=0.005))
    # a configuration noisier than the run keeps its own spread
    lo, hi = c[128].ratio_interval("graph")
    own = stats.t.ppf(0.975, 3) * logs128.std(ddof=1) / 2
    assert hi / lo == pytest.approx(math.exp(2 * own), rel=0.01)
    # one configuration's outlying groups do not set the others' floor: the median, not a pooled spread
    wild = _configs(results + _results(512, [1.0, 1.5, 0.7], [180] * 3))
    assert wild[64].host.spread["graph"] < 2 * run


def test_the_report_says_the_threshold_the_code_uses():
    from pathlib import Path

    text = (Path(__file__).parents[1] / "templates" / "report.html.j2").read_text()
    assert f"over {hostnoise.CONTENDED}x the run's quiet level, the {hostnoise.QUIET}th percentile" in text
