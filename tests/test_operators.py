"""Operator cells: counts, the timing loop, and one configuration through the runner in both frameworks."""

import json
import os
import time

from harness import allocator, operators
from tests.conftest import harness, quick_pynative_matrix


def test_parameter_and_flop_counts():
    conv = {"batch": 2, "in_channels": 3, "out_channels": 4, "size": 5}
    assert operators.params("conv2d", conv) == 4 * 3 * 9 + 4
    assert operators.flops("conv2d", conv, "fwd") == 2 * 2 * 4 * 25 * 3 * 9
    lin = {"batch": 8, "in_features": 16, "out_features": 32}
    assert operators.params("linear", lin) == 16 * 32 + 32
    assert operators.flops("linear", lin, "fwd+bwd") == 3 * 2 * 8 * 16 * 32
    assert operators.params("batchnorm2d", {"batch": 1, "channels": 7, "size": 3}) == 14


def test_inputs_are_identical_for_both_frameworks_and_seeded():
    a = operators.arrays("linear", {"batch": 4, "in_features": 3, "out_features": 2}, seed=5)
    b = operators.arrays("linear", {"batch": 4, "in_features": 3, "out_features": 2}, seed=5)
    assert all((a[k] == b[k]).all() for k in a) and set(a) == {"x", "weight", "bias", "grad"}


def test_blocked_time_grows_the_block_and_syncs_before_every_clock_read():
    calls = {"run": 0, "sync": 0}

    def run():
        calls["run"] += 1
        time.sleep(0.001)

    def sync():
        calls["sync"] += 1

    t = operators.blocked_time(run, sync, min_block_s=0.02, min_run_s=0.1, min_blocks=5, warmup=2)
    assert t["block_size"] >= 10, "a 1 ms iteration needs a block of >= 20 to fill 20 ms"
    assert t["blocks"] >= 5 and 0.001 <= t["median_s"] < 0.005 and t["iqr_s"] >= 0
    assert calls["sync"] >= t["blocks"] + 2  # warm-up, sizing and every timed block end with a sync


def test_one_configuration_in_both_frameworks_through_the_runner(tmp_path):
    out = tmp_path / "run"
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--only",
                "operator/linear/*/fp32/fwd/batch64-in_features64-out_features512",
                "--matrix", quick_pynative_matrix(tmp_path / "m.toml"))
    assert p.returncode == 0, p.stderr
    results = json.loads(harness("results", out, "--json").stdout)
    assert {(r["framework"], r["mode"]) for r in results} == {("pytorch", "eager"), ("mindspore", "graph"),
                                                              ("mindspore", "pynative")}
    for r in results:
        assert r["status"] == "ok" and r["kind"] == "operator" and r["op"] == "linear"
        assert r["params"] == 64 * 512 + 512 and r["dtype"] == "fp32" and r["direction"] == "fwd"
        assert r["median_s"] > 0 and r["iqr_s"] >= 0 and r["throughput"] == 64 / r["median_s"]
        assert r["flops_per_s"] > 0 and r["percent_of_peak"] is None  # a CPU's peak is not known
        assert "time_to_target_s" in r and r["time_to_target_s"] is None  # the contract's keys, null
        # Operator cells on CPU: one core and one compute thread in both frameworks; MindSpore's without
        # the host queue, its launching thread left as it is (on one core it computes there)
        assert r["settings"]["cpu_cores"] == [min(os.sched_getaffinity(0))] and r["settings"]["threads"] == 1
        ms = r["framework"] == "mindspore"
        assert (r["process_env"].get("MS_DEV_HOST_BLOCKING_RUN") == "1") is ms, r["process_env"]
        assert r["settings"].get("launching_thread", "").startswith("default policy (one core") is ms, r["settings"]
        # both frameworks' operator processes under the same allocator: tcmalloc where the host has it (MindSpore's
        # model cells keep glibc's), so that no process draws a buffer layout the other did not
        used = r["process_env"]["HARNESS_ALLOCATOR_USED"]
        assert used == allocator.choose(r["framework"], kind="operator")[0]
        assert used == "tcmalloc" or not allocator.find_library("tcmalloc"), r["process_env"]
    # one process per cell and repeat, the configuration's three cells taking turns (harness.matrix.schedule)
    order = [(r["framework"], r["mode"], r["repeat"]) for r in sorted(results, key=lambda r: r["started_at"])]
    assert [rep for *_, rep in order] == [0, 0, 0, 1, 1, 1] and order[0][:2] != order[3][:2], order
    p = harness("report", out)
    assert p.returncode == 0
    html = (out / "report" / "report.html").read_text()
    assert "GRAPH / PyTorch" in html and '<figure id="fig5-cpu"><svg' in html
    assert "operators" in (out / "report" / "report.tex").read_text().lower()
