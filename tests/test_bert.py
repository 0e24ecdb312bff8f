"""BERT (harness/models/bert): the masks both frameworks see, the vocabularies, and the BERT reference-gap figure:
from the same weights, the losses of two steps equal within 1e-4 in PyTorch eager and MindSpore GRAPH / PYNATIVE."""

import numpy as np
import pytest

from harness.models.bert import CLS, MASK, PAD, SEP, mask_batch
from harness.models.bert.vocab import SPECIALS, _frame, encode_reviews
from tests.helpers import probe_model

HP = {"vocab": 50, "min_freq": 1}


def _ids(rows: int = 6, length: int = 32) -> np.ndarray:
    rng = np.random.RandomState(0)
    return _frame([list(rng.randint(len(SPECIALS), 50, rng.randint(1, 40))) for _ in range(rows)], length)


def test_masks_are_the_seeds_and_spare_special_tokens():
    ids = _ids()
    a = mask_batch(ids, np.random.RandomState(3), 50, 0.15, 5)
    b = mask_batch(ids, np.random.RandomState(3), 50, 0.15, 5)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    masked, keys, pos, labels, weights = a
    assert masked.shape == ids.shape and keys.shape == ids.shape and pos.shape == labels.shape == weights.shape == (30,)
    np.testing.assert_array_equal(keys, (ids != PAD).astype(np.float32))
    real = weights > 0
    flat = ids.reshape(-1)
    np.testing.assert_array_equal(labels[real], flat[pos[real]])  # the original ids at the chosen positions
    assert not np.isin(flat[pos[real]], [PAD, CLS, SEP]).any()
    for i in range(len(ids)):
        n_real = int(((ids[i] != PAD) & (ids[i] != CLS) & (ids[i] != SEP)).sum())
        assert weights[i * 5:(i + 1) * 5].sum() == min(5, max(1, round(0.15 * n_real)))
    unchanged = masked.reshape(-1) == flat
    assert unchanged[np.setdiff1d(np.arange(flat.size), pos[real])].all()  # only chosen positions change
    assert (masked.reshape(-1)[pos[real]] == MASK).mean() > 0.5


def _data(texts: list[str], synthetic: bool) -> dict:
    split = {"text": texts, "label": np.zeros(len(texts), np.int64)}
    return {"train": split, "test": split, **({"synthetic": True} if synthetic else {})}


def test_synthetic_reviews_are_words_framed_by_cls_and_sep():
    vocab, ids = encode_reviews(_data(["w1 w2 w1", "w3<br />w1"], True), {"train": np.array([1, 0])}, HP, 5)
    assert vocab[:len(SPECIALS)] == SPECIALS and vocab[len(SPECIALS)] == "w1"
    w = {t: i for i, t in enumerate(vocab)}
    np.testing.assert_array_equal(ids["train"], [[CLS, w["w3"], w["w1"], SEP, PAD], [CLS, w["w1"], w["w2"], w["w1"],
                                                                                        SEP]])


def test_the_wordpiece_vocabulary_is_the_same_on_every_run():
    pytest.importorskip("tokenizers")
    texts = [f"The {w}ing of reviews, {w}ed and re{w}s!<br />Fine." for w in ("walk", "talk", "mark", "park")] * 5
    runs = [encode_reviews(_data(texts, False), {"train": np.arange(4)}, HP, 16) for _ in range(3)]
    assert all(r[0] == runs[0][0] for r in runs) and runs[0][0][:len(SPECIALS)] == SPECIALS
    assert all((r[1]["train"] == runs[0][1]["train"]).all() for r in runs)
    assert "<" not in runs[0][0]  # <br /> is a space, not a token


@pytest.mark.parametrize("ms_mode", ["graph", "pynative"])
def test_two_steps_from_the_same_weights_give_the_same_losses(tmp_path, ms_mode):
    pt = probe_model(tmp_path, "bert", "pytorch", "eager")
    ms = probe_model(tmp_path, "bert", "mindspore", ms_mode)
    for key in ("step_loss", "loss_after"):  # the first step's loss, and the loss the second step starts from
        assert abs(float(ms[key]) - float(pt[key])) <= 1e-4, (key, float(ms[key]), float(pt[key]))
