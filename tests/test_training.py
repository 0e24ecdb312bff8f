"""The training scenario's loop (harness/scenarios/training.py) with a scripted workload: where the clock
starts, what counts as training time, and `stop_at_target`."""

from types import SimpleNamespace

import pytest

from harness.config.cell import Cell
from harness.config.spec import ModelSpec
from harness.results import eventlog
from harness.scenarios import training


class Scripted:
    """A workload whose validation metric follows a script: one value per epoch."""

    samples_per_epoch = 10
    net = None

    def __init__(self, ctx, data, script):
        self.script = list(script)
        self.epochs = 0

    def train_epoch(self):
        self.epochs += 1
        return 1.0 / self.epochs

    def evaluate(self, split):
        return self.script[self.epochs - 1] if split == "val" else 0.5

    def state_arrays(self):
        return []


class ScriptedParts(Scripted):
    """The same, trained in parts of an epoch: one scripted value per part; `epochs` counts the parts trained."""

    def __init__(self, ctx, data, script):
        super().__init__(ctx, data, script)
        self.calls = []

    def train_epoch(self):
        raise AssertionError("with evals_per_epoch > 1 the loop trains through train_part")

    def train_part(self, part, parts):
        self.calls.append((part, parts))
        self.epochs += 1
        return 1.0 / self.epochs, 3 + part


def _run(tmp_path, monkeypatch, script, kind=Scripted, **spec):
    cell = Cell(id="model/gcn/pytorch/eager/amp-off/1dev", kind="model", model="gcn", framework="pytorch",
                mode="eager", amp="off", devices=1, repeats=1, timeout_s=60, seed=0,
                spec=ModelSpec(dataset="cora", metric="accuracy", target=0.7, throughput_unit="nodes/s",
                               epochs=len(script), **spec))
    made = {}

    def build(ctx, data):
        made["w"] = kind(ctx, data, script)
        return made["w"]

    monkeypatch.setattr(training, "model_module", lambda model, fw: SimpleNamespace(build=build))
    monkeypatch.setattr(training.datasets, "module", lambda name: SimpleNamespace(synthetic=lambda seed: {}))
    monkeypatch.setattr(training.mlperf, "log_workload", lambda *args: None)  # set-up keys: tests/test_logcheck.py
    ctx = SimpleNamespace(cell=cell, seed=0, synthetic=True, data_folder=None, world_size=1, profile_dir=None)
    backend = SimpleNamespace(synchronize=lambda ctx: None)
    events = eventlog.EventLog(tmp_path / "r0.mllog")
    training.run(ctx, backend, events)
    events.close()
    return made["w"], training.summarise(eventlog.read(tmp_path / "r0.mllog"), cell)


def test_without_stop_at_target_every_planned_epoch_runs(tmp_path, monkeypatch):
    w, s = _run(tmp_path, monkeypatch, [0.3, 0.75, 0.8, 0.9])
    assert w.epochs == 4 and len(s["curve"]) == 4
    assert s["time_to_target_s"] == pytest.approx(s["curve"][1][0]) and s["best_metric"] == 0.9


def test_every_evaluation_is_an_eval_interval_and_run_stop_comes_before_the_test_metric(tmp_path, monkeypatch):
    _run(tmp_path, monkeypatch, [0.3, 0.75, 0.8], stop_at_target=True)
    keys = [e["key"] for e in eventlog.read(tmp_path / "r0.mllog")]
    epoch = ["epoch_start", "epoch_stop", "eval_start", "eval_accuracy", "eval_stop"]
    assert keys == ["run_start", *epoch, *epoch, "run_stop", "test_metric"]
    assert all(line.startswith(":::MLLOG {") for line in (tmp_path / "r0.mllog").read_text().splitlines())


def test_stop_at_target_ends_training_at_the_first_evaluation_that_reaches_it(tmp_path, monkeypatch):
    w, s = _run(tmp_path, monkeypatch, [0.3, 0.75, 0.8, 0.9], stop_at_target=True)
    assert w.epochs == 2 and [v for _, v in s["curve"]] == [0.3, 0.75]
    assert s["time_to_target_s"] == pytest.approx(s["curve"][-1][0]) and s["test_metric"] == 0.5
    assert s["epochs_planned"] == 4 and len(s["epochs"]) == 2


def test_stop_at_target_runs_on_when_the_target_is_never_reached(tmp_path, monkeypatch):
    w, s = _run(tmp_path, monkeypatch, [0.3, 0.4, 0.5], stop_at_target=True)
    assert w.epochs == 3 and s["time_to_target_s"] is None and s["test_metric"] == 0.5


def test_evals_per_epoch_evaluates_after_each_part_and_stops_within_an_epoch(tmp_path, monkeypatch):
    w, s = _run(tmp_path, monkeypatch, [0.1, 0.2, 0.3, 0.4, 0.71, 0.9], kind=ScriptedParts, evals_per_epoch=3,
                stop_at_target=True)
    assert w.calls == [(0, 3), (1, 3), (2, 3), (0, 3), (1, 3)]             # stopped in the second epoch's part 2
    assert [v for _, v in s["curve"]] == [0.1, 0.2, 0.3, 0.4, 0.71]
    assert s["time_to_target_s"] == pytest.approx(s["curve"][-1][0])
    assert [(e["epoch"], e["part"], e["samples"]) for e in s["epochs"]] == [(0, 0, 3), (0, 1, 4), (0, 2, 5),
                                                                          (1, 0, 3), (1, 1, 4)]


def test_evals_per_epoch_needs_a_workload_that_trains_in_parts(tmp_path, monkeypatch):
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="cannot train an epoch in parts.*evals_per_epoch = 1"):
        _run(tmp_path, monkeypatch, [0.1, 0.2], evals_per_epoch=2)
