import numpy as np
import pytest

from harness import data
from harness.data import cora
from harness.errors import HarnessError


def _copy_cora(src, dst):
    folder = dst / cora.FOLDER
    folder.mkdir(parents=True)
    for name in cora.FILES:
        (folder / name).write_bytes((src / cora.FOLDER / name).read_bytes())
    return folder


def test_real_cora_verifies_and_loads_with_the_planetoid_split(shared_data):
    folder = data.prepare("cora", shared_data, allow_download=False)
    d = cora.load(folder)
    assert d["features"].shape == (2708, 1433) and d["num_classes"] == 7
    assert (len(d["train_idx"]), len(d["val_idx"]), len(d["test_idx"])) == (140, 500, 1000)
    assert len(d["adj_values"]) == 2708 + 2 * 5278  # self-loops + both directions of each undirected edge
    assert np.bincount(d["labels"]).tolist() == [351, 217, 418, 818, 426, 298, 180]
    np.testing.assert_allclose(d["features"].sum(1), 1.0, rtol=1e-5)


def test_checksum_mismatch_names_file_expected_and_found(shared_data, tmp_path):
    folder = _copy_cora(shared_data, tmp_path)
    with open(folder / "ind.cora.graph", "ab") as f:
        f.write(b"x")
    with pytest.raises(HarnessError) as e:
        data.prepare("cora", tmp_path, allow_download=False)
    msg = str(e.value)
    assert "ind.cora.graph" in msg and cora.FILES["ind.cora.graph"] in msg and "found" in msg
    assert "\n" not in msg


def test_missing_file_names_it_and_the_fix(tmp_path):
    (tmp_path / cora.FOLDER).mkdir()
    with pytest.raises(HarnessError, match=r"ind\.cora\.x is missing.*--download"):
        data.prepare("cora", tmp_path, allow_download=False)


def test_synthetic_cora_has_the_real_shapes_and_is_deterministic():
    a, b = cora.synthetic(7), cora.synthetic(7)
    assert a["features"].shape == (2708, 1433) and a["num_classes"] == 7
    assert (len(a["train_idx"]), len(a["val_idx"]), len(a["test_idx"])) == (140, 500, 1000)
    assert not set(a["train_idx"]) & set(a["val_idx"]) and not set(a["val_idx"]) & set(a["test_idx"])
    np.testing.assert_array_equal(a["adj_indices"], b["adj_indices"])


def test_unknown_dataset_is_a_clear_error():
    with pytest.raises(HarnessError, match="harness/data/imagenet.py"):
        data.module("imagenet")
