"""Multi-process (data-parallel) cells on CPU: torchrun with gloo, msrun with mccl."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, processes_with, with_quick_pynative


@pytest.mark.parametrize("fw_mode", ["pytorch/eager", "mindspore/pynative"])   # GRAPH: tests/test_multinode.py
def test_two_process_cells_are_ok_with_identical_weights_on_every_rank(scaling_run, fw_mode):
    """One repeat of every cell (the quick profile's claim_repeats would run the compared cells twice, a cost this test
    does not need): a scaling cell's efficiency is measured against the 1-device cell's same repeat (where the run
    holds it: PyTorch's; without it, none is stored)."""
    r = scaling_run.results[f"scaling/resnet50/{fw_mode}/amp-off/2dev"]
    single = scaling_run.results.get(f"model/resnet50/{fw_mode}/amp-off/1dev")
    assert r["status"] == "ok" and r["kind"] == "scaling" and r["devices"] == 2
    assert r["params_identical_across_ranks"] is True
    assert set(r["rank_throughput"]) == {"0", "1"} and all(v > 0 for v in r["rank_throughput"].values())
    assert r["global_throughput"] == pytest.approx(sum(r["rank_throughput"].values()))
    assert r["per_device_throughput"] == pytest.approx(r["global_throughput"] / 2)
    assert r["efficiency"] == (pytest.approx(r["per_device_throughput"] / single["mean_throughput_other_epochs"])
                               if single else None)
    assert "2 processes" in r["settings"]["distributed"]


@pytest.mark.parametrize("framework, mode", [("pytorch", "eager")])   # msrun's dead rank: tests/test_multinode.py
def test_a_rank_that_dies_fails_the_cell_with_every_ranks_log_and_leaves_no_process(tmp_path, framework, mode):
    matrix = with_quick_pynative((REPO / "harness" / "config" / "matrix.toml").read_text()).replace(
        "profile.quick = { epochs = 2, train_samples = 32,", "profile.quick = { epochs = 500, train_samples = 32,")
    (tmp_path / "m.toml").write_text(matrix)
    out = tmp_path / "run"
    cell = f"scaling/resnet50/{framework}/{mode}/amp-off/2dev"
    runner = subprocess.Popen([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--out", str(out),
                               "--synthetic", "--only", cell, "--matrix", str(tmp_path / "m.toml"),
                               "--repeats", "1"], cwd=REPO,  # one repeat: C5's claim_repeats would start a second
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    events = out / "cells" / cell / "r0.rank1.mllog"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (events.exists() and '"init_stop"' in events.read_text()):
        time.sleep(0.2)
    spec = str(out / "cells" / cell / "r0.spec.json")
    victims = [pid for pid in processes_with(spec)
               if b"RANK_ID=1" in Path(f"/proc/{pid}/environ").read_bytes()
               or b"\0RANK=1\0" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes()]
    assert victims, "rank 1 not found"
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    _, err = runner.communicate(timeout=300)
    r = json.loads((out / "cells" / cell / "r0.json").read_text())
    assert r["status"] == "failed", err
    assert r["reason"] == "rank 1: killed by SIGKILL"   # named by the pid its launcher reports
    assert "r0.rank0.log" in r["log_tail"] and "r0.rank1.log" in r["log_tail"]
    time.sleep(1)
    assert not processes_with(spec), "a worker outlived its cell"
