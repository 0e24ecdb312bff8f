"""A cell's settings (harness/config/spec.py): frozen all the way down, the same after the child reads them back from
spec.json, and the one declaration of the matrix file's key types (matrix_check.py derives its tables from it)."""

import dataclasses
import json
import typing

import pytest

from harness.config import matrix, matrix_check
from harness.config.cell import Cell
from harness.config.spec import InferenceSpec, ModelSpec, OperatorSpec, PassesSpec, ProfileSettings
from harness.errors import HarnessError
from tests.helpers import MATRIX_TOML

MATRIX = MATRIX_TOML.read_text()


def _cells():
    m = matrix.load()
    return [c for p in m.profiles for c in m.expand(p)]


def test_every_kind_of_cell_has_its_spec_class():
    want = {"model": ModelSpec, "scaling": ModelSpec, "operator": OperatorSpec, "inference": InferenceSpec,
            "passes": PassesSpec}
    cells = _cells()
    assert {c.kind for c in cells} == set(want)
    assert all(type(c.spec) is want[c.kind] for c in cells)


def test_settings_cannot_be_changed_in_place():
    cell = next(c for c in matrix.load().expand("target") if c.model == "gru")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.spec.epochs = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.spec = cell.spec
    with pytest.raises(TypeError):
        cell.spec.hparams["batch"] = 1          # a read-only mapping
    with pytest.raises(AttributeError):
        cell.spec.hparams["buckets"].append(40)  # a list in the file is a tuple here
    changed = dataclasses.replace(cell.spec, epochs=1)  # a new value is how settings change
    assert changed.epochs == 1 and cell.spec.epochs == 4
    op = next(c for c in matrix.load().expand("quick") if c.kind == "operator")
    with pytest.raises(TypeError):
        op.spec.shape["batch"] = 1


def test_a_cell_reads_back_from_its_spec_json_as_it_was_written():
    for cell in _cells():
        d = json.loads(json.dumps(cell.to_dict()))
        assert Cell.from_dict(d) == cell
        assert d["spec"] == json.loads(json.dumps(cell.spec.to_dict()))


def test_optional_settings_have_the_defaults_the_readers_assumed():
    spec = ModelSpec(dataset="cora", metric="accuracy", target=0.7, throughput_unit="nodes/s")
    assert (spec.epochs, spec.train_samples, spec.eval_samples, spec.val_samples) == (None, None, None, None)
    assert spec.stop_at_target is False and spec.evals_per_epoch == 1 and spec.hparams == {} and spec.title is None
    assert InferenceSpec(net="n", batch=1).timing == {}


def test_passes_cells_are_made_with_what_their_scenario_builds():
    """An epoch count where the profile sets none and the fixed batch in the hparams: set when the cell is made,
    no longer by the child in place."""
    m = matrix.load()
    passes = {c.model: c.spec for c in m.expand("companion") if c.kind == "passes"}
    resnet = passes["resnet50"]  # no settings for the companion profile
    assert resnet.epochs == 1 and resnet.hparams["batch"] == resnet.batch == 16
    assert resnet.hparams["lr"] == m.data["models"]["resnet50"]["hparams"]["lr"]
    assert passes["lstm"].epochs == m.data["models"]["lstm"]["profile"]["companion"]["epochs"]


def test_the_matrix_checks_key_tables_come_from_the_spec_classes():
    hints = typing.get_type_hints(ModelSpec)
    assert set(matrix_check.MODEL_KEYS) == {f.name for f in dataclasses.fields(ModelSpec)} | {"profile"}
    assert set(matrix_check.MODEL_PROFILE_KEYS) == {f.name for f in dataclasses.fields(ProfileSettings)}
    assert matrix_check.MODEL_REQUIRED == ("dataset", "metric", "target", "throughput_unit")
    assert hints["target"] is float and matrix_check.MODEL_KEYS["target"] == (int, float)
    assert matrix_check.MODEL_KEYS["epochs"] is int and matrix_check.MODEL_KEYS["hparams"] is dict
    assert matrix_check.MODEL_KEYS["stop_at_target"] is bool and matrix_check.MODEL_KEYS["title"] is str

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Extra(ModelSpec):
        warmup: float | None = None

    assert matrix_check.spec_keys(Extra)["warmup"] == (int, float)  # a new field is a new key, typed once


@pytest.mark.parametrize("old, new, message", [
    ("target = 0.70", 'target = "seventy"', "target is 'seventy' (a string); it must be a number"),
    ("profile.quick = { epochs = 30 }", "profile.quick = { epochs = 30, eval_samples = true }",
     "eval_samples is True (a boolean); it must be an integer"),
    ('batches = [1, 16, 32, 64]', 'batches = [1, 16, 32, 64]\nbatch = 8', "has unknown key(s) 'batch'"),
    ('batches = [1, 16, 32, 64]\n', '', "[inference.resnet50_imagenet] has no 'batches'"),
    ("[passes]\nbatch = 16", '[passes]\nbatch = "16"', "[passes] batch is '16' (a string); it must be an integer"),
    ("timing = { min_run_s = 0.3, min_blocks = 5 }", "timing = 0.3", "profile.quick timing is 0.3"),
    ('profile.quick = { threads', 'profile.fast = { threads', "has 'fast', which is not one of"),
])
def test_bad_settings_give_one_line(tmp_path, old, new, message):
    assert old in MATRIX, old
    path = tmp_path / "m.toml"
    path.write_text(MATRIX.replace(old, new, 1))
    with pytest.raises(HarnessError) as e:
        matrix.load(path)
    assert message in str(e.value) and "\n" not in str(e.value)
