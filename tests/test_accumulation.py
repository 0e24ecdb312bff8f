"""Gradient accumulation: a cell the device cannot hold takes its batch in micro-batches (harness.devices.memory.plan),
and its update is the whole batch's.

- The step: BERT (small, dropout off, synthetic data) trained two optimiser steps with each batch in 2 and 4
  micro-batches ends with the parameters of the whole batch's steps, in PyTorch eager and MindSpore GRAPH (and, in
  PyTorch, the last step's gradients and the epoch's loss are the whole batch's).
- The plan: BERT-base on a V100 16 GB, a V100 32 GB and an Ascend 910 (32 GB) accumulates, in the fewest micro-batches
  that fit; on an H100 it does not; a model that cannot accumulate (BatchNorm) and a device too small for a micro-batch
  of one are skipped with the reason; HARNESS_ACCUMULATION_STEPS forces it, HARNESS_DEVICE_MEMORY=off plans nothing.
- A real quick BERT cell run with HARNESS_ACCUMULATION_STEPS=2: its settings, its MLPerf log (which MLPerf's checker
  passes with gradient_accumulation_steps 2) and the report's mark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness.config.matrix import load
from harness.devices import memory as devicememory
from harness.errors import HarnessError
from harness.frameworks import backend
from harness.host import platforms
from harness.host.plan import Host
from tests.conftest import REPO, harness

BERT = "model/bert/pytorch/eager/amp-off/1dev"
BERT_AMP = "model/bert/mindspore/graph/amp-O3/1dev"
RESNET = "model/resnet50/pytorch/eager/amp-off/1dev"
FORCE = "HARNESS_ACCUMULATION_STEPS"


def _probe(tmp_path, framework, mode, steps):
    out = tmp_path / f"{framework}-{mode}-{steps}.npz"
    env = {**os.environ, **backend(framework).process_env("cpu"), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, str(REPO / "tests" / "probe_accumulation.py"), "bert", framework, mode,
                        str(steps), out], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    got = np.load(out)
    n = int(got["n"])
    arrays = [got[f"arr_{i}"] for i in range(len(got.files) - 2)]
    return float(got["loss"]), arrays[:n], arrays[n:2 * n], arrays[2 * n:]


# Each probe is a process of 4-5 s on 2 cores: four micro-batches of 2 in PyTorch, two of 4 in MindSpore.
@pytest.mark.parametrize("framework, mode, steps", [("pytorch", "eager", 4), ("mindspore", "graph", 2)])
def test_an_accumulated_step_is_the_whole_batchs(tmp_path, framework, mode, steps):
    loss, before, whole, grads = _probe(tmp_path, framework, mode, 1)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(whole, before, strict=True))
    assert moved > 1e-4, "the steps did not move the weights: the comparison would prove nothing"
    acc_loss, acc_before, acc, acc_grads = _probe(tmp_path, framework, mode, steps)
    for a, b in zip(acc_before, before, strict=True):
        np.testing.assert_array_equal(a, b)   # the same initial weights
    off = max(float(np.abs(a - b).max()) for a, b in zip(acc, whole, strict=True))
    # fp32 sums in another order: measured 4e-5 (PyTorch, 4 micro-batches) and 1.5e-4 (MindSpore, 2) of the
    # steps' largest move (Adam magnifies the differences of the smallest gradients)
    assert off <= 1e-3 * moved, (steps, off, moved)
    assert acc_loss == pytest.approx(loss, rel=1e-6)   # the shares weigh each micro-batch's loss
    for a, b in zip(acc_grads, grads, strict=True):   # PyTorch: the last step's summed gradients
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * max(float(np.abs(g).max()) for g in grads))


def _cells():
    return {c.id: c for c in load().expand("accelerator")}


def _plan(cell_id, device):
    return devicememory.plan(_cells()[cell_id], float(devicememory.DEVICES[device].gib))


@pytest.mark.parametrize("cell_id, device, accumulates", [
    (BERT, "V100-16", True), (BERT, "V100-32", True), (BERT, "910-32", True), (BERT, "H100-80", False),
    (BERT_AMP, "V100-16", True), (BERT_AMP, "910-32", False)])
def test_bert_base_accumulates_where_the_device_cannot_hold_its_batch(cell_id, device, accumulates):
    cell, have = _cells()[cell_id], float(devicememory.DEVICES[device].gib)
    plan = devicememory.plan(cell, have)
    assert plan.skip is None
    if not accumulates:
        assert plan.steps == 1 and devicememory.fits(devicememory.need(cell).gib, have)
        return
    assert not devicememory.fits(devicememory.need(cell).gib, have)
    assert plan.steps > 1 and 256 % plan.steps == 0 and devicememory.fits(plan.need.gib, have)
    assert plan.label == f"batch 256 as {plan.steps} x {256 // plan.steps} accumulated"
    # The fewest micro-batches that fit: every smaller divisor's micro-batch is predicted not to.
    for k in (k for k in range(2, plan.steps) if 256 % k == 0):
        assert not devicememory.fits(devicememory.micro_need(cell, 256 // k).gib, have)


def test_a_micro_batchs_need_is_the_line_through_the_accumulated_traces():
    cell = _cells()[BERT]
    acc = devicememory.load()["models"]["bert"]["fp32"]["accumulated"]
    for micro, peak in zip(acc["micro_batches"], acc["peak_bytes"], strict=True):
        assert devicememory.micro_need(cell, micro).gib == pytest.approx(peak / 2**30)
    assert acc["peak_bytes"][0] > acc["peak_bytes"][1]   # a larger micro-batch needs more
    # Below the whole batch's need at half the batch: the sums of the gradients cost less than half the activations.
    assert devicememory.micro_need(cell, 128).gib < devicememory.need(cell).gib
    assert "accumulated traces" in devicememory.micro_need(cell, 32).basis


def test_what_cannot_fit_even_in_micro_batches_is_skipped_with_the_reason():
    bert = devicememory.plan(_cells()[BERT], 1.0)
    assert bert.steps == 1 and bert.skip.startswith("predicted to need 30.2 GiB of device memory")
    assert "with gradient accumulation even a micro-batch of 1 is predicted at" in bert.skip
    resnet = devicememory.plan(_cells()[RESNET], 2.0)
    assert "it cannot take its batch in micro-batches (BatchNorm would normalise each micro-batch" in resnet.skip
    assert devicememory.too_big(_cells()[RESNET], 2.0) == resnet.skip
    assert devicememory.too_big(_cells()[BERT], 16.0) is None   # it accumulates there


def test_the_override_forces_accumulation_and_refuses_a_bad_value(monkeypatch):
    monkeypatch.setenv(FORCE, "2")
    cells = {c.id: c for c in load().expand("quick")}
    bert = devicememory.plan(cells["model/bert/pytorch/eager/amp-off/1dev"], None)   # on a CPU: no memory to go by
    assert (bert.steps, bert.skip, bert.label) == (2, None, "batch 8 as 2 x 4 accumulated")
    gcn = devicememory.plan(cells["model/gcn/pytorch/eager/amp-off/1dev"], None)
    assert gcn.skip == (f"{FORCE}=2 asks for gradient accumulation, which gcn does not do: GCN trains full-batch on "
                        f"one graph: there is no batch to split into micro-batches")
    monkeypatch.setenv(FORCE, "3")
    assert "does not divide bert's batch of 8" in devicememory.plan(cells["model/bert/pytorch/eager/amp-off/1dev"],
                                                                    None).skip
    monkeypatch.setenv(FORCE, "two")
    with pytest.raises(HarnessError, match=f"{FORCE}='two': give the micro-batches a training step takes"):
        devicememory.plan(cells["model/bert/pytorch/eager/amp-off/1dev"], None)
    p = harness("list", "--profile", "quick", extra_env={FORCE: "0"})
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith(f"error: {FORCE}='0': give the micro-batches")


def test_the_host_and_harness_list_plan_alike(monkeypatch, capsys):
    from harness import cli

    monkeypatch.setattr(platforms, "visible_devices", lambda platform: 1)
    host = Host.probe(load(), "cuda", "accelerator", memory=(16.0, "V100-16 as sold"))
    plan = host.plan(_cells()[BERT])
    assert host.verdict(_cells()[BERT]) is None and plan.steps > 1
    assert cli.main(["list", "--profile", "accelerator", "--platform", "cuda", "--device", "V100-16", "--json"]) == 0
    rows = {r["cell"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[BERT]["accumulation_steps"] == plan.steps and rows[BERT]["skip"] is None
    assert rows[BERT]["micro_memory_gib"] == round(plan.need.gib, 3)
    monkeypatch.setenv("HARNESS_DEVICE_MEMORY", "off")   # nothing planned for memory
    off = Host.probe(load(), "cuda", "accelerator")
    assert off.plan(_cells()[BERT]).steps == 1 and off.verdict(_cells()[BERT]) is None


@pytest.fixture(scope="module")
def accumulated_run(tmp_path_factory):
    """A real run of the quick profile's PyTorch BERT cell with its batch of 8 in 2 micro-batches, and its report."""
    out = tmp_path_factory.mktemp("accumulated") / "run"
    p = harness("run", "--platform", "cpu", "--profile", "quick", "--only", BERT, "--out", out, "--synthetic",
                "--repeats", "1", "--max-repeats", "1", extra_env={FORCE: "2", "HARNESS_PROFILE": "off"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "running (timeout 900 s; batch 8 as 2 x 4 accumulated)" in p.stdout + p.stderr
    r = harness("report", out)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_an_accumulated_cell_records_it_and_its_log_passes_mlperfs_checker(accumulated_run):
    folder = accumulated_run / "cells" / BERT
    result = json.loads((folder / "r0.json").read_text())
    assert result["status"] == "ok"
    assert {k: result["settings"][k] for k in ("accumulation_steps", "micro_batch", "accumulation_why")} == {
        "accumulation_steps": 2, "micro_batch": 4, "accumulation_why": f"{FORCE}=2"}
    spec = json.loads((folder / "r0.spec.json").read_text())   # the runner's decision, which the child records
    assert (spec["accumulation_steps"], spec["accumulation_why"]) == (2, f"{FORCE}=2")
    lines = (folder / "r0.mllog").read_text().splitlines()
    logged = {e["key"]: e["value"] for e in (json.loads(line.removeprefix(":::MLLOG ")) for line in lines)}
    assert (logged["gradient_accumulation_steps"], logged["global_batch_size"], logged["micro_batch_size"]) == (2, 8, 4)
    p = harness("check-logs", accumulated_run)
    assert p.returncode == 0 and f"SUCCESS {BERT}/r0.mllog" in p.stdout, p.stdout + p.stderr


def test_the_report_marks_an_accumulated_cell(accumulated_run):
    html = (accumulated_run / "report" / "report.html").read_text()
    said = f"batch 8 as 2 x 4 accumulated ({FORCE}=2)"
    assert f'<sup title="{said}">†</sup>' in html
    assert f"took its batch in micro-batches ({said})" in html
    tex = (accumulated_run / "report" / "tables" / "table1.tex").read_text()
    assert "$^\\dagger$ & " in tex and "batch 8 as 2 x 4 accumulated" in tex   # the row, and the note
