"""What a host without tcmalloc changes, measured: docs/runs/allocator holds the quick profile's operator cells and
C1's model cells under each allocator configuration, two runs each on one host; effect.json sums them up for the
check and the report's banner, which quote it (harness.host.configdiff reads it with the standard library only)."""

import json

from harness.host import allocator_effect, configdiff


def test_the_summary_is_what_the_committed_runs_give():
    assert allocator_effect.main([]) == 0, f"run `{allocator_effect.FIX}`"


def test_two_runs_of_each_configuration_on_one_host():
    data = json.loads(allocator_effect.SUMMARY.read_text())
    per = {}
    for r in data["runs"]:
        per.setdefault(r["pytorch_model_allocator"], []).append(r)
        assert r["load_average"]["start"] and r["load_average"]["finish"], r["run"]
        assert len(r["operators"]) == len(data["expected"]["operators"]) == 12
        assert set(r["c1"]) == set(allocator_effect.C1_MODELS)
    assert sorted(per) == ["glibc-tuned", "tcmalloc"] and all(len(v) >= 2 for v in per.values())
    assert len({r["cpu"] for r in data["runs"]}) == 1


def test_the_check_and_the_banner_quote_the_measured_runs():
    data = json.loads(allocator_effect.SUMMARY.read_text())
    said = configdiff.runs_effect("glibc-tuned", "tcmalloc")
    without = [r for r in data["runs"] if r["pytorch_model_allocator"] == "glibc-tuned"]
    for r in without:
        assert f"{r['c1'][data['headline']]['ratio']:.2f}" in said["c1"]
        assert r["verdicts"]["C1"] in said["c1"]
    assert said["where"].startswith("measured on one 2-core") and said["figure5"].startswith("Figure 5's ratios")
    assert configdiff.runs_effect("jemalloc", "tcmalloc") == {}   # no run of that configuration: nothing quoted


def test_a_host_on_another_cpu_is_told_so(monkeypatch):
    import harness.host.envinfo
    from harness.preflight import NOTE, PASS, checks_allocator
    from harness.preflight import data as preflight_data
    from harness.preflight import host as probe

    def cpu_row():   # this host's CPU and the expected run's, as the check collects them
        facts = {"cpu": probe.cpu_facts(), "expected_run": probe.expected_run_facts()}
        return checks_allocator.cpu_row(probe.Host("cpu", facts=facts), preflight_data.measured())

    data = json.loads(allocator_effect.SUMMARY.read_text())
    monkeypatch.setattr(harness.host.envinfo, "cpu_model", lambda: data["runs"][0]["cpu"])
    row = cpu_row()
    assert row.verdict == NOTE and row.ok() and data["expected"]["cpu"] in row.needed
    assert "Figure 5: " in row.note and "outside the expected run's intervals" in row.note
    monkeypatch.setattr(harness.host.envinfo, "cpu_model", lambda: data["expected"]["cpu"])
    monkeypatch.setattr(probe.os, "cpu_count", lambda: 2)
    assert cpu_row().verdict == PASS


def test_one_interval_test_for_the_summary_and_the_cpu_quote():
    """configdiff.outside: what the summary lists per run and what the CPU quote counts. A ratio on an interval's
    end is inside; an interval without an upper end bounds only from below; no ratio or no interval: not outside."""
    base = {"operators": [{"config": c, "interval": iv} for c, iv in
                          (("a", [1.0, 2.0]), ("b", [1.0, 2.0]), ("c", [1.0, None]), ("d", None), ("e", [1.0, 2.0]),
                           ("f", [1.0, 2.0]))]}
    run = {"operators": [{"config": c, "ratio": r} for c, r in
                         (("a", 2.0), ("b", 2.5), ("c", 9.0), ("d", 9.0), ("e", None), ("f", 0.5), ("g", 9.0))]}
    assert configdiff.outside(run, base) == ["b", "f"]
    data = json.loads(allocator_effect.SUMMARY.read_text())
    for r in data["runs"]:
        base = next(b for b in data["runs"] if b["run"] == r["baseline"])
        assert r["operators_outside_baseline"] == ([] if r is base else configdiff.outside(r, base))
