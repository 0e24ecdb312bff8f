"""aclImdb: both accepted layouts, verified; the LSTM's tokenisation, train-only vocabulary, padding and masking."""

import tarfile

import numpy as np
import pytest

from harness.config.spec import ProfileSettings
from harness.data import fixtures, imdb
from harness.errors import HarnessError
from harness.models import lstm


def test_the_official_tarball_is_verified_and_read(tmp_path, monkeypatch):
    fx = fixtures.imdb(tmp_path, np.random.RandomState(0), per_class=12, layout="official")
    monkeypatch.setattr(imdb, "FILES", fx.pins)
    monkeypatch.setattr(imdb, "SIZES", {"train": 24, "test": 24})
    assert imdb.prepare(tmp_path, allow_download=False) == tmp_path
    d = imdb.load(tmp_path)
    assert d["train"]["text"] == fx.expected["train"]["text"] and d["test"]["text"] == fx.expected["test"]["text"]
    assert d["train"]["label"].tolist() == [0] * 12 + [1] * 12  # by (label, numeric id): negatives first
    with tarfile.open(tmp_path / imdb.OFFICIAL) as tar:  # the unlabelled reviews were there, and left out
        assert "aclImdb/train/unsup/0_0.txt" in tar.getnames()
        first_neg = next(n for n in tar.getnames() if n.startswith("aclImdb/train/neg/0_"))
        assert d["train"]["text"][0] == tar.extractfile(first_neg).read().decode()
    monkeypatch.setattr(imdb, "FILES", {imdb.OFFICIAL: "0" * 64})
    with pytest.raises(HarnessError, match="wrong sha256"):
        imdb.prepare(tmp_path, allow_download=False)


def test_the_split_tarballs_are_verified_member_by_member(tmp_path, monkeypatch):
    fx = fixtures.imdb(tmp_path, np.random.RandomState(0), per_class=12, layout="split")
    monkeypatch.setattr(imdb, "SPLIT_FILES", fx.pins)
    monkeypatch.setattr(imdb, "SIZES", {"train": 24, "test": 24})
    imdb.prepare(tmp_path, allow_download=False)
    assert imdb.load(tmp_path)["test"]["text"] == fx.expected["test"]["text"]
    listing = tmp_path / "aclImdb_test_v1.members.sha256"
    name = next(line.split("  ")[1] for line in listing.read_text().splitlines() if "/pos/" in line)
    listing.write_text(f"{'0' * 64}  {name}\n")
    with pytest.raises(HarnessError, match="does not match its sha256"):
        imdb.load(tmp_path)
    (tmp_path / "aclImdb_test_v1.tar.gz").unlink()
    with pytest.raises(HarnessError, match="aclImdb_test_v1.tar.gz is missing"):
        imdb.prepare(tmp_path, allow_download=False)


def test_an_empty_folder_names_both_layouts_and_the_synthetic_stand_in(tmp_path):
    with pytest.raises(HarnessError) as e:
        imdb.prepare(tmp_path, allow_download=False)
    assert imdb.OFFICIAL in str(e.value) and "aclImdb_train_v1.tar.gz" in str(e.value)
    assert "--synthetic imdb" in str(e.value)


def test_the_shared_copy_loads_complete(shared_data):
    folder = shared_data / imdb.FOLDER
    imdb.prepare(folder, allow_download=False)
    d = imdb.load(folder)
    assert [len(d[s]["text"]) for s in ("train", "test")] == [25000, 25000]
    assert [int(d[s]["label"].sum()) for s in ("train", "test")] == [12500, 12500]


def test_vocabulary_from_train_only_padding_and_last_token():
    data = {"train": {"text": ["a b a", "b c<br />a", "a"], "label": np.array([0, 1, 0])},
            "test": {"text": ["zz a", ""], "label": np.array([1, 0])}}
    hp = {"vocab": 10, "min_freq": 1, "max_len": 4}
    corpus = lstm.Corpus(data, hp, ProfileSettings(), seed=0)
    assert corpus.vocab == ["<pad>", "<unk>", "a", "b", "c"]  # 'zz' is only in the test split
    test = corpus.split["test"]
    rows = {tuple(r) for r in test["ids"].tolist()}
    assert rows == {(1, 2, 0, 0), (1, 0, 0, 0)}  # 'zz' -> <unk>; an empty review is one <unk>; right-padded
    assert sorted(test["last"].tolist()) == [0, 1]  # the index of the last real token
    assert lstm.tokenize("It's GOOD.<br />Really") == ["it's", "good", "really"]
