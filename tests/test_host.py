"""harness.host.plan.Host: one object says whether a cell runs on this host, for all three kinds of reason (a [[skip]]
rule, a framework this Python lacks, too few devices), and the runner and `harness list --platform` give its answer
alike. The host is faked where the answer depends on it: a framework hidden from importlib.util.find_spec (the way a
missing install looks; nothing is imported), and the devices a platform shows through platforms.visible_devices."""

import importlib.util
import json
import sys

import pytest

from harness import cli
from harness.config.matrix import load
from harness.host import envinfo, platforms
from harness.host.plan import Host
from harness.launch import runner

RULE = "quick profile on a CPU: mixed precision there"   # harness/config/matrix.toml's [[skip]] rule, its why's start
GCN_MS = "model/gcn/mindspore/graph/amp-off/1dev"
GCN_PT = "model/gcn/pytorch/eager/amp-off/1dev"
RESNET_AMP = "model/resnet50/pytorch/eager/amp-O2/1dev"
RESNET_2 = "scaling/resnet50/pytorch/eager/amp-off/2dev"


@pytest.fixture
def host_without_mindspore(monkeypatch):
    """A Python that has no MindSpore, on a host that shows 1 GPU."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mindspore" else real(name, *a))
    monkeypatch.setattr(platforms, "visible_devices", lambda platform: 1)
    monkeypatch.delenv("HARNESS_NNODES", raising=False)


def _cell(cell_id: str):
    return next(c for c in load().expand("quick") if c.id == cell_id)


def test_one_object_answers_for_every_kind_of_reason(host_without_mindspore):
    cuda = Host.probe(load(), "cuda", "quick")
    assert cuda.devices == 1 and set(cuda.missing) == {"mindspore"}
    assert cuda.verdict(_cell(GCN_PT)) is None
    why = cuda.verdict(_cell(GCN_MS))
    assert why.startswith("mindspore is not installed in this Python") and "no module mindspore" in why
    assert sys.executable in why
    assert cuda.verdict(_cell(RESNET_2)) == "needs 2 devices on each host, the host shows 1"
    assert cuda.verdict(_cell(RESNET_AMP)) is None                  # the rule is the CPU's

    cpu = Host.probe(load(), "cpu", "quick")
    assert cpu.verdict(_cell(RESNET_AMP)).startswith(RULE)
    assert cpu.verdict(_cell(GCN_PT)) is None
    assert cpu.verdict(_cell(RESNET_2)) is None      # cpu counts no devices: a [[skip]] rule says what is too many
    # A rule comes first: the same setting in MindSpore is skipped for the rule, not for the missing framework.
    assert cpu.verdict(_cell("model/resnet50/mindspore/graph/amp-O2/1dev")).startswith(RULE)


def test_a_framework_present_but_broken_still_runs_in_its_cell(monkeypatch):
    """Only absence is a reason: an installed module that fails to import fails in its cell, with its own error."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert Host.probe(load(), "ascend", "quick", devices=1).missing == {}


@pytest.mark.parametrize("platform, only", [
    ("cpu", f"{GCN_PT},{GCN_MS},{RESNET_AMP}"),        # none, the framework, the [[skip]] rule
    ("cuda", f"{GCN_PT},{GCN_MS},{RESNET_2}"),         # none, the framework, the devices
])
def test_the_runner_and_harness_list_give_the_same_answer(host_without_mindspore, monkeypatch, capsys, tmp_path,
                                                         platform, only):
    monkeypatch.setattr(envinfo, "capture", lambda: {})
    monkeypatch.setattr(runner, "_run_child", lambda store, cell, repeat, *a, **k: runner._base(
        cell, repeat, platform, True) | {"status": "ok"})   # a cell that would run: not this test's question
    out = tmp_path / "run"
    assert runner.run(load(), "quick", platform, out, only=only, synthetic="all", repeats=1,
                      log=lambda s: None) == 0
    ran = {c: json.loads((out / "cells" / c / "r0.json").read_text()) for c in only.split(",")}

    capsys.readouterr()
    assert cli.main(["list", "--profile", "quick", "--platform", platform, "--only", only, "--json",
                     "--repeats", "1"]) == 0
    listed = {row["cell"]: row["skip"] for row in json.loads(capsys.readouterr().out)}

    assert set(listed) == set(ran)
    for cell, result in ran.items():
        assert result["status"] == ("skipped" if listed[cell] else "ok"), cell
        assert result["reason"] == listed[cell], cell
    assert listed[GCN_PT] is None and "no module mindspore" in listed[GCN_MS]
    if platform == "cuda":
        assert listed[RESNET_2] == "needs 2 devices on each host, the host shows 1"
    else:
        assert listed[RESNET_AMP].startswith(RULE)
