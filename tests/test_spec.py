"""A cell's settings (harness/spec.py): frozen all the way down, the same after the child reads them back from
spec.json, and the one declaration of the matrix file's key types (matrix_check.py derives its tables from it)."""

import dataclasses
import typing

import pytest

from harness import matrix, matrix_check
from harness.errors import HarnessError
from harness.spec import ModelSpec, ProfileSettings
from tests.test_bad_input import MATRIX


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
    ("profile.quick = { epochs = 200 }", "profile.quick = { epochs = 200, eval_samples = true }",
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
