"""harness/results/measure.py, the one measurement type: statistics over a cell's ok repeats, one rule for a repeat that
never reached its target, and the claims, the report and its companion section reading the same numbers.
(tools/compare_outputs.py renders everything for the quick fixture and its subsets to diff two versions.)"""

import pytest

from harness import claims
from harness.report import build as report
from harness.report import companion
from harness.results import measure
from tests.helpers import write_run


def _gcn(fw="pytorch", mode="eager", model="gcn", **kw):
    return {"cell": f"model/{model}/{fw}/{mode}/amp-off/1dev", "kind": "model", "model": model, "framework": fw,
            "mode": mode, "amp": "off", "devices": 1, "status": "ok", "platform": "cpu", "metric": "accuracy",
            "target": 0.7, "mean_throughput_other_epochs": 100.0, "first_epoch_throughput": 90.0, **kw}


def test_a_sample_keeps_its_raw_values_and_derives_its_statistics():
    s = measure.Sample((3.0, None, 1.0, 2.0))
    assert s.samples == (3.0, None, 1.0, 2.0) and s.values == (3.0, 1.0, 2.0)
    assert (s.median, s.min, s.max, s.n) == (2.0, 1.0, 3.0, 3)
    assert s.spread() == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3, "interval": None}
    assert measure.Sample().spread() == {"median": None, "min": None, "max": None, "n": 0, "interval": None}


def test_the_median_interval_comes_from_order_statistics():
    assert measure.Sample(tuple(range(5))).interval() is None          # 5 repeats cannot give 95%
    assert measure.Sample(tuple(range(6))).interval() == (0, 5)        # 1 - 2/64 >= 95%
    assert measure.Sample(tuple(range(20))).interval() == (5, 14)      # ranks 6 and 15 of 20
    assert measure.Sample(tuple(range(20))).interval(0.5) == (7, 12)  # ranks 8, 13: 74% (9, 12: 49.7%)


@pytest.mark.parametrize("times, expected", [
    ((2.0, None, 4.0), 4.0),          # the repeat that never reached it is the slowest
    ((2.0, None, None), None),        # most never reached it: the cell did not
    ((1.0, 2.0, 3.0, None), 2.5),
    ((1.0, None), None),
    ((None,), None),
])
def test_a_repeat_that_never_reached_the_target_counts_as_infinitely_slow(times, expected):
    s = measure.summarise([_gcn(repeat=k, time_to_target_s=t) for k, t in enumerate(times)])
    assert s["model/gcn/pytorch/eager/amp-off/1dev"].time_to_target.median == expected


def test_claims_report_and_companion_read_the_same_time_to_target(tmp_path):
    times = (2.0, None, None)
    results = [_gcn(model=m, repeat=k, time_to_target_s=t, curve=[[k + 1.0, 0.8]])
               for m in ("gcn", "lstm") for k, t in enumerate(times)]
    results += [_gcn("mindspore", "graph", repeat=0, time_to_target_s=1.0)]
    run = write_run(tmp_path / "run", "cpu", {}, results)
    table = {r["model"]: r for r in claims.time_to_target_table(results)}
    assert table["gcn"]["pytorch_s"] is None and "PyTorch did not reach the target" in table["gcn"]["notes"]
    rows = {r["cell"]: r for r in report.collect([run])["rows"]}
    assert rows["model/gcn/pytorch/eager/amp-off/1dev"]["time_to_target"]["median"] is None
    assert rows["model/gcn/pytorch/eager/amp-off/1dev"]["curve"] == [[2.0, 0.8]]    # the median repeat: 1 of 0..2
    lstm = companion.training_rows(results)
    assert [r["time_to_target_s"] for r in lstm if r["framework"] == "pytorch"] == [None]


def test_one_operator_ratio_for_claims_report_and_figures():
    def op(fw, mode, throughput):
        return {"cell": f"operator/linear/{fw}/{mode}/fp32/fwd/b1", "kind": "operator", "op": "linear",
                "framework": fw, "mode": mode, "dtype": "fp32", "direction": "fwd", "shape": {"b": 1}, "params": 10,
                "throughput": throughput, "status": "ok", "platform": "cpu"}
    index = measure.summarise([op("pytorch", "eager", 100.0), op("mindspore", "graph", 150.0),
                               op("mindspore", "pynative", 50.0)])
    [config] = measure.operator_ratios(index)
    assert (config.ratio("graph"), config.ratio("pynative"), config.params) == (1.5, 0.5, 10)
    [paired] = claims.paired_ratios(index)
    assert (paired.ratio, paired.ms_mode, paired.cells) == (1.5, "graph", [
        "operator/linear/mindspore/graph/fp32/fwd/b1", "operator/linear/pytorch/eager/fp32/fwd/b1"])
    [entry] = report.operator_ratios({"cpu": index})
    assert (entry["ratio_graph"], entry["ratio_pynative"], entry["throughput"]["pytorch/eager"]) == (1.5, 0.5, 100.0)


def test_a_ratio_interval_is_a_seeded_percentile_bootstrap_over_each_sides_repeats():
    a, b = measure.Sample((10.0, 11.0, 12.0)), measure.Sample((5.0, 5.5, 6.0))
    lo, hi = measure.ratio_interval(a, b)
    assert measure.ratio_interval(a, b) == (lo, hi)  # deterministic: a fixed seed
    # The extremes a resample can give are 10/6 and 12/5; at 95% over 4000 resamples both are reached.
    assert (lo, hi) == (pytest.approx(10 / 6), pytest.approx(12 / 5))
    assert lo <= a.median / b.median <= hi
    narrow = measure.ratio_interval(measure.Sample((10.0, 10.0, 10.0)), measure.Sample((5.0, 5.0, 5.0)))
    assert narrow == (2.0, 2.0)
    wider = measure.ratio_interval(a, b, level=0.5)
    assert lo <= wider[0] <= wider[1] <= hi


def test_a_ratio_needs_two_repeats_a_side_for_an_interval():
    assert measure.ratio_interval(measure.Sample((10.0,)), measure.Sample((5.0, 6.0))) is None
    assert measure.ratio_interval(measure.Sample((10.0, 11.0)), measure.Sample((5.0,))) is None
    assert measure.ratio_interval(measure.Sample((10.0, 11.0)), measure.Sample((5.0, 6.0))) is not None


def test_a_repeat_that_never_reached_the_target_is_infinitely_slow_inside_the_resamples():
    slow = measure.Sample((None, None, 12.0), slowest_if_missing=True)
    fast = measure.Sample((5.0, 5.5, 6.0), slowest_if_missing=True)
    assert measure.ratio_interval(slow, fast) == (2.0, None)   # upper end +inf: reported as None
    assert measure.ratio_interval(fast, slow)[0] == 0.0        # the other way round, a resample's ratio can be 0
    never = measure.Sample((None, None, 6.0), slowest_if_missing=True)
    assert measure.ratio_interval(slow, never) == (0.0, None)  # inf / inf has no ratio: the interval widens


def test_the_report_prints_each_ratios_interval_where_there_are_repeats(tmp_path):
    scale = (0.97, 1.0, 1.03)
    results = [_gcn(fw, mode, repeat=k, time_to_target_s=t * f, mean_throughput_other_epochs=tput * f,
                    curve=[[t * f, 0.75]])
               for fw, mode, t, tput in (("pytorch", "eager", 2.0, 100.0), ("mindspore", "graph", 4.0, 50.0))
               for k, f in enumerate(scale)]
    run = write_run(tmp_path / "run", "cpu", {"hostname": "h"}, results)
    data = report.collect([run])
    ttt = next(t for t in data["time_to_target"]["cpu"] if t["model"] == "gcn")
    iv = measure.ratio_interval(measure.Sample(tuple(2.0 * f for f in scale)),
                                measure.Sample(tuple(4.0 * f for f in scale)))
    assert ttt["ratio_interval"] == iv and data["intervals"]
    ms = next(line for line in data["table1"] if line["framework"] == "mindspore")
    assert ms["vs_pytorch"]["cpu"]["ratio"] == pytest.approx(0.5)
    html = report.render([run]).read_text()
    assert measure.interval_text(iv) in html and "verdict-inconclusive" in html
    tex = (tmp_path / "run" / "report" / "tables" / "time_to_target.tex").read_text()
    assert report.latex_escape(measure.interval_text(iv)) in tex
