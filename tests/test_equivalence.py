"""Both frameworks, built from the same weights, compute the same function (fp32).

Each framework runs in its own process (with its process settings), as cells do."""


import pytest

from harness.config import matrix
from tests.helpers import probe_model, rel_diff

MODELS = sorted(matrix.load().data["models"])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("ms_mode", ["graph", "pynative"])
def test_same_forward_and_same_loss_after_one_step(tmp_path, model, ms_mode):
    pt = probe_model(tmp_path, model, "pytorch", "eager")
    ms = probe_model(tmp_path, model, "mindspore", ms_mode)
    assert pt["forward"].shape == ms["forward"].shape
    assert rel_diff(ms["forward"], pt["forward"]) <= 1e-4
    assert abs(float(ms["step_loss"]) - float(pt["step_loss"])) <= 1e-3 * abs(float(pt["step_loss"]))
    assert abs(float(ms["loss_after"]) - float(pt["loss_after"])) <= 1e-3 * abs(float(pt["loss_after"]))
    assert float(pt["loss_after"]) < float(pt["step_loss"]), "the step changed the weights (loss went down)"


def test_models_command_reports_equal_sizes_for_both_frameworks():
    import json

    from tests.helpers import harness

    p = harness("models", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    for model in MODELS:
        sizes = {(r["parameters"], r["layers"]) for r in rows if r["model"] == model}
        assert len(sizes) == 1 and None not in next(iter(sizes)), rows
    assert {(r["parameters"], r["layers"]) for r in rows if r["model"] == "gcn"} == {(1433 * 16 + 16 * 7, 2)}
