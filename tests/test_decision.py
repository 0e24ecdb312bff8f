"""Each cell's decision made once (harness.host.plan.Host.decide): what a host does with a cell (run it, run it with its
batch in micro-batches, or skip it) and why, memoised per cell, with Host.verdict, Host.plan and Host.memory_line
reading it; the runner deciding every cell once per run and handing each child its reason through its spec, which the
child records as given (harness.devices.accumulation.settings) instead of reading the environment again. The device's
memory is faked; no cell's child runs."""

import json

import pytest

from harness.config.matrix import load
from harness.devices import accumulation
from harness.devices import memory as devicememory
from harness.devices import query as devicequery
from harness.host import envinfo, platforms
from harness.host import plan as plan_mod
from harness.host.plan import ACCUMULATE, MEMORY, RUN, SKIP, CellDecision, Host
from harness.launch import runner

BERT = "model/bert/pytorch/eager/amp-off/1dev"
GCN = "model/gcn/pytorch/eager/amp-off/1dev"
RESNET = "model/resnet50/pytorch/eager/amp-off/1dev"
RESNET_2 = "scaling/resnet50/pytorch/eager/amp-off/2dev"
FORCE = accumulation.FORCE


def _cells(profile="accelerator"):
    return {c.id: c for c in load().expand(profile)}


@pytest.fixture
def counted(monkeypatch):
    """How many times each cell's memory plan is made."""
    made: dict[str, int] = {}
    real = devicememory.plan

    def plan(cell, *a, **k):
        made[cell.id] = made.get(cell.id, 0) + 1
        return real(cell, *a, **k)

    monkeypatch.setattr(plan_mod.devicememory, "plan", plan)
    return made


def test_one_decision_per_cell_read_by_verdict_plan_and_memory_line(monkeypatch, counted):
    monkeypatch.delenv(FORCE, raising=False)
    cells = _cells()
    host = Host("cuda", "accelerator", 1, {}, load(), 16.0, "V100-16 as sold")
    bert = host.decide(cells[BERT])
    assert (bert.action, bert.reason, bert.skip) == (ACCUMULATE, MEMORY, None) and bert.plan.steps > 1
    assert host.decide(cells[BERT]) is bert                       # memoised: the same answer, not a new one
    assert host.verdict(cells[BERT]) is None and host.plan(cells[BERT]) is bert.plan
    spec = runner._spec(runner.RunStore("/nonexistent"), cells[BERT], 0, "cuda", {}, True, {}, None, bert)
    assert (spec["accumulation_steps"], spec["accumulation_why"]) == (bert.plan.steps, MEMORY)   # the child's spec
    gcn = host.decide(cells[GCN])
    assert (gcn.action, gcn.reason, gcn.plan.steps) == (RUN, None, 1)
    two = host.decide(cells[RESNET_2])
    assert (two.action, two.by, two.skip) == (SKIP, "devices", "needs 2 devices on each host, the host shows 1")
    assert host.verdict(cells[RESNET_2]) == two.reason and not two.planned
    said = host.memory_line([cells[BERT], cells[GCN], cells[RESNET_2]])
    assert said.startswith("device memory: 16.0 GiB a device (V100-16 as sold); 1 cells take their batch in "
                           f"micro-batches (gradient accumulation): bert fp32 ({bert.plan.label})")
    assert counted == {BERT: 1, GCN: 1, RESNET_2: 1}              # asked seven ways, planned once each


def test_a_skip_for_memory_and_the_reason_an_override_gives(monkeypatch):
    monkeypatch.delenv(FORCE, raising=False)
    cells = _cells()
    small = Host("cuda", "accelerator", 1, {}, load(), 2.0, "faked")
    resnet = small.decide(cells[RESNET])
    assert (resnet.action, resnet.by) == (SKIP, "memory") and resnet.reason == resnet.plan.skip
    assert "it cannot take its batch in micro-batches" in small.verdict(cells[RESNET])
    assert resnet.planned   # the memory plan had the say: memory_line counts it among the cells too big

    monkeypatch.setenv(FORCE, "2")
    quick = _cells("quick")
    cpu = Host("cpu", "quick", 1, {}, load())
    bert = cpu.decide(quick[BERT])
    assert (bert.action, bert.reason, bert.plan.steps) == (ACCUMULATE, f"{FORCE}=2", 2)
    gcn = cpu.decide(quick[GCN])
    assert gcn.action == SKIP and gcn.reason.startswith(f"{FORCE}=2 asks for gradient accumulation, which gcn")


def test_the_child_records_the_reason_it_is_given_not_the_environments(monkeypatch):
    monkeypatch.setenv(FORCE, "2")   # the environment would say the override; the decision said the memory
    assert accumulation.settings(2, 8, MEMORY) == {"accumulation_steps": 2, "micro_batch": 4,
                                                   "accumulation_why": MEMORY}
    assert accumulation.settings(1, 8, None) == {"accumulation_steps": 1}
    cell = _cells("quick")[BERT]
    spec = runner._spec(runner.RunStore("/nonexistent"), cell, 0, "cpu", {}, True, {}, None,
                        CellDecision(ACCUMULATE, MEMORY, devicememory.Plan(steps=2, batch=8)))
    assert (spec["accumulation_steps"], spec["accumulation_why"]) == (2, MEMORY)
    whole = runner._spec(runner.RunStore("/nonexistent"), cell, 0, "cpu", {}, True, {}, None,
                         CellDecision(RUN, None, devicememory.Plan()))
    assert (whole["accumulation_steps"], whole["accumulation_why"]) == (1, None)   # a whole batch: nothing to explain
    assert json.loads(json.dumps(spec))["accumulation_steps"] == 2


def test_the_runner_decides_each_cell_once_and_passes_the_reason_down(monkeypatch, tmp_path, counted):
    monkeypatch.delenv(FORCE, raising=False)
    monkeypatch.delenv("HARNESS_NNODES", raising=False)
    monkeypatch.setattr(platforms, "visible_devices", lambda platform: 1)
    monkeypatch.setattr(devicequery, "host_memory", lambda platform: (16.0, "faked"))
    monkeypatch.setattr(envinfo, "capture", lambda: {})
    given = {}

    def child(store, cell, repeat, *args):
        given[cell.id] = args[-1]
        return runner._base(cell, repeat, "cuda", True) | {"status": "ok"}

    monkeypatch.setattr(runner, "_run_child", child)
    only = f"{GCN},{BERT},{RESNET_2}"
    out = tmp_path / "run"
    assert runner.run(load(), "accelerator", "cuda", out, only=only, synthetic="all", repeats=1,
                      log=lambda s: None) == 0
    assert counted == {GCN: 1, BERT: 1, RESNET_2: 1}   # the estimate, the line, each cell and --resume ask the same
    assert (given[GCN].action, given[GCN].plan.steps) == (RUN, 1)
    assert (given[BERT].action, given[BERT].reason) == (ACCUMULATE, MEMORY) and given[BERT].plan.steps > 1
    skipped = json.loads((out / "cells" / RESNET_2 / "r0.json").read_text())
    assert skipped["status"] == "skipped" and skipped["reason"] == "needs 2 devices on each host, the host shows 1"
