"""Both frameworks, built from the same weights, compute the same function (fp32).

Each framework runs in its own process (with its process settings), as cells do."""

import os
import subprocess
import sys

import numpy as np
import pytest

from harness.config import matrix
from harness.frameworks import backend
from tests.conftest import REPO

MODELS = sorted(matrix.load().data["models"])


def _probe(tmp_path, model, framework, mode):
    out = tmp_path / f"{model}-{framework}-{mode}.npz"
    env = {**os.environ, **backend(framework).process_env("cpu"), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, str(REPO / "tests" / "probe_model.py"), model, framework, mode, out],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return np.load(out)


def rel_diff(a, b):
    """Largest absolute difference, relative to the largest magnitude of the reference."""
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("ms_mode", ["graph", "pynative"])
def test_same_forward_and_same_loss_after_one_step(tmp_path, model, ms_mode):
    pt = _probe(tmp_path, model, "pytorch", "eager")
    ms = _probe(tmp_path, model, "mindspore", ms_mode)
    assert pt["forward"].shape == ms["forward"].shape
    assert rel_diff(ms["forward"], pt["forward"]) <= 1e-4
    assert abs(float(ms["step_loss"]) - float(pt["step_loss"])) <= 1e-3 * abs(float(pt["step_loss"]))
    assert abs(float(ms["loss_after"]) - float(pt["loss_after"])) <= 1e-3 * abs(float(pt["loss_after"]))
    assert float(pt["loss_after"]) < float(pt["step_loss"]), "the step changed the weights (loss went down)"


def test_models_command_reports_equal_sizes_for_both_frameworks():
    import json

    from tests.conftest import harness

    p = harness("models", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    for model in MODELS:
        sizes = {(r["parameters"], r["layers"]) for r in rows if r["model"] == model}
        assert len(sizes) == 1 and None not in next(iter(sizes)), rows
    assert {(r["parameters"], r["layers"]) for r in rows if r["model"] == "gcn"} == {(1433 * 16 + 16 * 7, 2)}
