import pytest

from harness.config import matrix
from harness.config.spec import model_spec
from harness.errors import HarnessError


def test_quick_profile_has_every_mode_and_amp_level_of_gcn():
    ids = {c.id for c in matrix.load().expand("quick", only="model/gcn/*")}
    assert ids == {"model/gcn/pytorch/eager/amp-off/1dev", "model/gcn/pytorch/eager/amp-O2/1dev",
                   *(f"model/gcn/mindspore/{mode}/amp-{amp}/1dev" for mode in ("graph", "pynative")
                     for amp in ("off", "O2", "O3"))}


def test_ids_are_unique_and_stable_across_loads():
    for profile in matrix.load().profiles:
        a = [c.id for c in matrix.load().expand(profile)]
        assert a == [c.id for c in matrix.load().expand(profile)]
        assert len(a) == len(set(a))


def _matrix(tmp_path, body):
    p = tmp_path / "m.toml"
    p.write_text(body)
    return matrix.load(p)


BASE = """
[axes]
framework = ["pytorch", "mindspore"]
mode = ["eager", "graph", "pynative"]
amp = ["off", "O2", "O3"]
devices = [1, 2, 8]
[models.gcn]
dataset = "cora"
metric = "accuracy"
target = 0.5
throughput_unit = "nodes/s"
profile.p = { epochs = 1 }
[operators.linear]
sweep = { batch = [8, 16], in_features = [4], out_features = [2] }
[[exclude]]
framework = "pytorch"
mode = ["graph", "pynative"]
why = "MindSpore modes"
[[exclude]]
framework = "mindspore"
mode = "eager"
why = "PyTorch mode"
[[exclude]]
framework = "pytorch"
amp = "O3"
why = "no O3 in PyTorch"
[[skip]]
platform = "cpu"
devices = 8
why = "too many processes for a CPU"
[profiles.p]
models = ["gcn"]
operators = ["linear"]
frameworks = ["pytorch", "mindspore"]
modes = ["eager", "graph", "pynative"]
amp = ["off", "O2", "O3"]
devices = [1, 2, 8]
"""


def test_exclusion_rules_prune_the_product(tmp_path):
    cells = _matrix(tmp_path, BASE).expand("p")
    models = [c for c in cells if c.kind in ("model", "scaling")]
    # pytorch: eager x {off, O2} x 3 devices = 6; mindspore: {graph, pynative} x 3 amp x 3 devices = 18
    assert len(models) == 6 + 18
    assert not any(c.framework == "pytorch" and c.mode in ("graph", "pynative") for c in cells)
    assert not any(c.framework == "mindspore" and c.mode == "eager" for c in cells)
    assert not any(c.framework == "pytorch" and c.amp == "O3" for c in cells)
    assert {c.kind for c in models if c.devices > 1} == {"scaling"}
    assert "scaling/gcn/mindspore/graph/amp-O3/2dev" in {c.id for c in cells}


def test_operator_sweep_is_a_product_of_its_lists(tmp_path):
    ops = [c for c in _matrix(tmp_path, BASE).expand("p") if c.kind == "operator"]
    # pytorch eager + mindspore graph + mindspore pynative, 2 batch sizes each
    assert len(ops) == 3 * 2
    assert "operator/linear/mindspore/graph/fp32/fwd/batch16-in_features4-out_features2" in {c.id for c in ops}


def test_skip_rules_depend_on_the_platform(tmp_path):
    m = _matrix(tmp_path, BASE)
    cell = next(c for c in m.expand("p") if c.devices == 8)
    assert m.skip_rule({**cell.axes(), "platform": "cpu", "profile": "p"}) == "too many processes for a CPU"
    assert m.skip_rule({**cell.axes(), "platform": "cuda", "profile": "p"}) is None


def test_only_glob_filters_and_empty_match_is_an_error(tmp_path):
    m = _matrix(tmp_path, BASE)
    assert {c.framework for c in m.expand("p", only="*/mindspore/*")} == {"mindspore"}
    with pytest.raises(HarnessError, match="matches no cell"):
        m.expand("p", only="model/nothing/*")


@pytest.mark.parametrize("bad, message", [
    (BASE + "[[exclude]]\nframwork = 'pytorch'\nwhy = 'typo'\n", "unknown key"),
    (BASE + "[[skip]]\nplatform = 'cpu'\n", "no 'why'"),
    (BASE.replace('modes = ["eager", "graph", "pynative"]', 'modes = ["eager", "jit"]'), "'jit', which is not one of"),
    (BASE.replace('models = ["gcn"]', 'models = ["resnet"]'), "'resnet', which is not one of"),
    (BASE + "[profiles.q]\nmodel = ['m']\n", "unknown key"),
    ("[axes\n", "not valid TOML"),
])
def test_bad_matrix_files_give_one_clear_error(tmp_path, bad, message):
    with pytest.raises(HarnessError, match=message):
        _matrix(tmp_path, bad)


def test_unknown_profile_names_the_choices():
    with pytest.raises(HarnessError, match="choose one of: accelerator, companion, full, quick"):
        matrix.load().expand("fast")


def test_profile_settings_merge_into_the_model_spec():
    spec = model_spec({"dataset": "cora", "metric": "accuracy", "target": 0.7, "throughput_unit": "nodes/s",
                       "hparams": {"lr": 0.1, "batch": 128}, "profile": {"quick": {
                           "epochs": 2, "train_samples": 512, "hparams": {"batch": 32}}}}, "quick")
    assert spec.hparams == {"lr": 0.1, "batch": 32} and spec.epochs == 2 and spec.train_samples == 512
    assert spec.eval_samples is None and spec.evals_per_epoch == 1 and not spec.stop_at_target  # the defaults


def test_shards_split_a_profile_deterministically_into_disjoint_balanced_slices():
    cells = matrix.load().expand("quick")
    slices = [matrix.shard(matrix.load().expand("quick"), f"{k}/4") for k in range(1, 5)]
    ids = [c.id for s in slices for c in s]
    assert sorted(ids) == sorted(c.id for c in cells) and len(set(ids)) == len(ids)
    assert max(map(len, slices)) - min(map(len, slices)) <= 1
    assert [c.id for c in matrix.shard(cells, "2/4")] == [c.id for c in slices[1]]
    assert {c.framework for c in slices[0]} == {"pytorch", "mindspore"}
