"""Operator cells: counts, the timing loop, and one configuration through the runner in both frameworks."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from harness.host import allocator
from harness.results import measure
from harness.scenarios.operator import ops as operators
from harness.scenarios.operator import turns
from tests.helpers import harness, quick_pynative_matrix


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
                "--matrix", quick_pynative_matrix(tmp_path / "m.toml"), "--max-repeats", "2")
    assert p.returncode == 0, p.stderr
    results = json.loads(harness("results", out, "--json").stdout)
    assert {(r["framework"], r["mode"]) for r in results} == {("pytorch", "eager"), ("mindspore", "graph"),
                                                              ("mindspore", "pynative")}
    for r in results:
        assert r["status"] == "ok" and r["kind"] == "operator" and r["op"] == "linear"
        assert r["params"] == 64 * 512 + 512 and r["dtype"] == "fp32" and r["direction"] == "fwd"
        # the process's time is the fast quantile of its blocks (harness.results.measure.fast_time), the median beside
        # it
        assert 0 < r["fast_s"] <= r["median_s"] and r["iqr_s"] >= 0 and r["throughput"] == 64 / r["fast_s"]
        assert r["fast_s"] == pytest.approx(float(np.quantile(r["block_times_s"], measure.FAST_QUANTILE)))
        # every operator process on a CPU at the same addresses (harness.scenarios.operator.ops.fixed_layout), where
        # the kernel lets a process turn randomisation off (a container's seccomp profile may not)
        assert r["settings"]["address_randomisation"] == ("off" if _layout_can_be_fixed() else
                                                          "on (personality() refused)")
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
    # one process per cell and repeat; a repeat's three cells alive at once, timing one block each in turn
    # (harness.scenarios.operator.turns): one group per repeat, each cell with its place in it and the group's rounds
    # of blocks
    for k in (0, 1):
        group = [r for r in results if r["repeat"] == k]
        assert len({r["turns"]["group"] for r in group}) == 1 and len(group) == 3
        assert sorted(r["turns"]["position"] for r in group) == [0, 1, 2]
        assert all(r["turns"]["rounds"] == turns.ROUNDS == len(r["block_times_s"]) for r in group)
        # the host memory's state just before each block (harness.scenarios.operator.turns.Probe), kept with the blocks
        assert all(len(r["probe_s"]) == turns.ROUNDS and min(r["probe_s"]) > 0 for r in group)
        # each process imported its framework on any core, then confined every thread to the operator's one core
        assert all(r["settings"]["cpu_cores"] == [min(os.sched_getaffinity(0))] for r in group)
    assert {r["turns"]["group"] for r in results if r["repeat"] == 0} != \
        {r["turns"]["group"] for r in results if r["repeat"] == 1}
    p = harness("report", out)
    assert p.returncode == 0
    html = (out / "report" / "report.html").read_text()
    assert "GRAPH / PyTorch" in html and '<figure id="fig5-cpu"><svg' in html
    assert "operators" in (out / "report" / "report.tex").read_text().lower()


def _layout_can_be_fixed() -> bool:
    code = "from harness.scenarios.operator import ops as operators; print(operators.fixed_layout())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "True"


def test_an_operator_process_is_started_again_with_fixed_addresses(tmp_path):
    """fixed_layout() turns randomisation off for what the process execs next; the program then sees it off, and a
    second call asks for no second exec."""
    if not _layout_can_be_fixed():
        pytest.skip("this kernel or container refuses personality(ADDR_NO_RANDOMIZE)")
    ops = "from harness.scenarios.operator import ops as operators"
    code = (f"import os, sys\n{ops}\n"
            "if operators.fixed_layout():\n    os.execv(sys.executable, [sys.executable, '-c', "
            f"'{ops}; print(operators.layout_state(), operators.fixed_layout())'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["off", "False"]


def test_pynative_operator_blocks_hold_eight_iterations_the_others_one():
    assert operators.sweep_timing("mindspore", "pynative")["min_block_iters"] == 8
    assert operators.sweep_timing("mindspore", "graph")["min_block_iters"] == 1
    assert operators.sweep_timing("pytorch", "eager") == operators.SWEEP_TIMING
