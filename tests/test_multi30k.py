"""Multi30K data module and the GRU model's framework-neutral text pipeline."""

import numpy as np
import pytest

from harness.config.spec import ProfileSettings
from harness.data import multi30k
from harness.models import gru
from tests.helpers import SHARED_DATA

HP = {"min_freq": 2, "max_len": 40}


def test_tokenize_splits_words_and_punctuation_lowercased():
    assert gru.tokenize("Two young, White males are outside.") == ["two", "young", ",", "white", "males", "are",
                                                                  "outside", "."]
    assert gru.tokenize("L'homme porte un t-shirt (bleu) aujourd'hui !") == [
        "l'", "homme", "porte", "un", "t-shirt", "(", "bleu", ")", "aujourd'", "hui", "!"]
    assert gru.tokenize("A man's   dog") == ["a", "man'", "s", "dog"]


@pytest.mark.parametrize("text", [
    "two young, white males are outside near many bushes.",
    "l'homme porte un t-shirt (bleu) aujourd'hui.",
    "a man's dog jumps: 100% of the time!",
    "deux hommes aux fourneaux préparent à manger.",
])
def test_detokenize_inverts_tokenize_on_canonically_spaced_text(text):
    assert gru.detokenize(gru.tokenize(text)) == text


def test_tokenize_is_deterministic():
    text = "Une petite fille grimpe dans une maisonnette en bois."
    assert gru.tokenize(text) == gru.tokenize(text)


def _tiny():
    return {
        "train": {"en": ["A dog runs.", "A dog sits.", "A cat sleeps."],
                  "fr": ["Un chien court.", "Un chien est assis.", "Un chat dort."]},
        "val": {"en": ["A bird flies."], "fr": ["Un oiseau vole."]},
        "test": {"en": ["A dog flies."], "fr": ["Un chien vole."]},
    }


def test_vocab_from_train_only_with_min_freq():
    corpus = gru.Corpus(_tiny(), HP, ProfileSettings())
    assert corpus.src_vocab == gru.SPECIALS + [".", "a", "dog"]        # 'bird', 'cat', 'runs' rare or val only
    assert corpus.tgt_vocab == gru.SPECIALS + [".", "un", "chien"]
    assert corpus.src_vocab[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"] and gru.PAD == 0


def test_corpus_arrays_are_padded_truncated_and_shifted():
    corpus = gru.Corpus(_tiny(), {"min_freq": 1, "max_len": 3}, ProfileSettings(train_samples=2))
    a = corpus.split["train"]
    assert corpus.n_train == 2 and a["src"].shape == (3, 4)               # + the all-<pad> fill row
    v = {w: i for i, w in enumerate(corpus.tgt_vocab)}
    # "un chien court ." truncated to 3 tokens
    assert a["tgt_in"][0].tolist() == [gru.BOS, v["un"], v["chien"], v["court"]]
    assert a["tgt_out"][0].tolist() == [v["un"], v["chien"], v["court"], gru.EOS]
    assert a["last"][0] == 3 and a["src"][0, 3] == gru.EOS
    assert not a["src"][-1].any() and not a["tgt_out"][-1].any()
    src, last, _, tgt_out = corpus.batch("train", np.array([1]), 4)
    assert src.shape == (4, 4) and (tgt_out[1:] == gru.PAD).all() and (last[1:] == 0).all()


def test_reverse_source_feeds_the_source_last_to_first_and_keeps_eos_and_target():
    plain = gru.Corpus(_tiny(), {"min_freq": 1, "max_len": 3}, ProfileSettings())
    rev = gru.Corpus(_tiny(), {"min_freq": 1, "max_len": 3, "reverse_source": True}, ProfileSettings())
    v = {w: i for i, w in enumerate(rev.src_vocab)}
    assert rev.split["train"]["src"][0].tolist() == [v["runs"], v["dog"], v["a"], gru.EOS]   # "a dog runs" (cut at 3)
    for s in ("train", "val", "test"):
        p, r = plain.split[s], rev.split[s]
        for i, n in enumerate(p["last"]):
            assert r["src"][i, :n].tolist() == p["src"][i, :n][::-1].tolist()
            assert (r["src"][i, n:] == p["src"][i, n:]).all()                  # <eos> and pads where they were
        assert all((p[k] == r[k]).all() for k in ("last", "tgt_in", "tgt_out"))


def test_epoch_order_depends_on_seed_and_epoch_only():
    corpus = gru.Corpus(multi30k.synthetic(0), HP, ProfileSettings(train_samples=300))
    a = corpus.epoch_batches(128, 7, 1)
    assert [len(b) for b in a] == [128, 128, 44]
    assert all((x == y).all() for x, y in zip(a, corpus.epoch_batches(128, 7, 1), strict=True))
    assert not (a[0] == corpus.epoch_batches(128, 7, 2)[0]).all()
    assert sorted(np.concatenate(a).tolist()) == list(range(300))


def test_epoch_parts_are_consecutive_slices_of_the_epoch_order():
    corpus = gru.Corpus(multi30k.synthetic(0), {**HP, "buckets": [8, 16]}, ProfileSettings(train_samples=600))
    whole = corpus.epoch_batches(64, 7, 1)
    parts = [corpus.epoch_part(64, 7, 1, k, 4) for k in range(4)]
    assert [len(p) for p in parts] == [len(whole) * (k + 1) // 4 - len(whole) * k // 4 for k in range(4)]
    assert all((x == y).all() for x, y in zip(whole, [b for p in parts for b in p], strict=True))
    assert all((x == y).all() for x, y in zip(whole, corpus.epoch_part(64, 7, 1, 0, 1), strict=True))


def test_length_buckets_cut_training_batches_to_the_narrowest_width_that_holds_every_row():
    hp = {**HP, "buckets": [8, 16]}
    corpus = gru.Corpus(multi30k.synthetic(0), hp, ProfileSettings(train_samples=600, eval_samples=50))
    assert corpus.widths == [8, 16, 41]
    batches = corpus.epoch_batches(64, 7, 1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(600))        # every row once
    assert all((x == y).all() for x, y in zip(batches, corpus.epoch_batches(64, 7, 1), strict=True))
    seen = set()
    a = corpus.split["train"]
    for idx in batches:
        assert len(set(corpus.bucket[idx].tolist())) == 1                     # one bucket per batch
        src, last, tgt_in, tgt_out = corpus.batch("train", idx, 64)
        w = src.shape[1]
        seen.add(w)
        assert w == tgt_in.shape[1] == tgt_out.shape[1] and w in corpus.widths
        # nothing cut: the <eos> of every source and target lies inside the width, and the cut part is all <pad>
        assert (src[np.arange(len(idx)), last[:len(idx)]] == gru.EOS).all()
        assert ((tgt_out[:len(idx)] == gru.EOS).sum(1) == 1).all()
        assert not a["src"][idx, w:].any() and not a["tgt_out"][idx, w:].any()
        if w > corpus.widths[0]:                                              # and not wider than it must be
            narrower = corpus.widths[corpus.widths.index(w) - 1]
            assert (a["tgt_out"][idx, narrower - 1:] != gru.PAD).any() or (a["last"][idx] >= narrower).any()
    assert seen == {8, 16}                                                    # synthetic: 3-14 words, '.', <eos>
    assert corpus.batch("val", np.arange(4), 8)[0].shape == (8, corpus.T)    # evaluation keeps the full width
    plain = gru.Corpus(multi30k.synthetic(0), HP, ProfileSettings(train_samples=600))
    assert plain.widths == [41] and plain.batch("train", np.arange(3), 4)[0].shape == (4, 41)


def test_val_samples_limits_the_validation_split_only():
    corpus = gru.Corpus(multi30k.synthetic(0), HP, ProfileSettings(train_samples=10, eval_samples=30, val_samples=20))
    assert (len(corpus.refs["val"]), len(corpus.refs["test"])) == (20, 30)


def test_synthetic_is_deterministic_and_shaped_like_the_real_data():
    a, b = multi30k.synthetic(3), multi30k.synthetic(3)
    assert a == b
    assert a != multi30k.synthetic(4)
    assert {s: len(a[s]["en"]) for s in a} == multi30k.SIZES
    assert all(len(a[s]["en"]) == len(a[s]["fr"]) for s in a)
    # word-by-word translation: same number of tokens on both sides
    pairs = zip(a["val"]["en"], a["val"]["fr"], strict=True)
    assert all(len(gru.tokenize(e)) == len(gru.tokenize(f)) for e, f in pairs)


def test_init_weights_deterministic_and_in_gru_layout():
    w = gru.init_weights(1, 10, 12, 4, 6)
    assert w["enc_w_ih"].shape == (18, 4) and w["enc_w_hh"].shape == (18, 6) and w["dec_b_hh"].shape == (18,)
    assert w["out_w"].shape == (12, 6) and w["dec_emb"].shape == (12, 4)
    assert all((w[k] == v).all() for k, v in gru.init_weights(1, 10, 12, 4, 6).items())


def test_bleu_of_identical_text_is_100():
    refs = ["Un homme en chemise bleue se tient sur une échelle.", "Deux hommes préparent à manger."]
    assert gru.bleu(refs, refs) == pytest.approx(100.0)
    hyps = [gru.detokenize(gru.tokenize(r)) for r in refs]                 # lowercased decodes
    assert gru.bleu(hyps, refs) == pytest.approx(100.0)


def test_files_are_the_six_en_fr_files():
    assert sorted(multi30k.FILES) == sorted(f"{s}.{lang}.gz" for s in ("train", "val", "test_2016_flickr")
                                            for lang in ("en", "fr"))
    assert all(len(h) == 64 for h in multi30k.FILES.values())
    assert all(url.endswith("/data/task1/raw/" + name) for name, url in multi30k.URLS.items())


def test_real_data_loads():
    folder = SHARED_DATA / multi30k.FOLDER
    if not folder.is_dir():
        pytest.skip(f"no real data at {folder}")
    from harness.data import prepare

    prepare("multi30k", SHARED_DATA, allow_download=False)              # verifies the pinned hashes
    data = multi30k.load(folder)
    assert {s: (len(data[s]["en"]), len(data[s]["fr"])) for s in data} == {
        "train": (29000, 29000), "val": (1014, 1014), "test": (1000, 1000)}
    assert data["train"]["en"][0] == "Two young, White males are outside near many bushes."
    corpus = gru.Corpus(data, HP, ProfileSettings())
    assert 4000 < len(corpus.src_vocab) < 8000 and 4000 < len(corpus.tgt_vocab) < 9000
    unk = (corpus.split["val"]["src"] == gru.UNK).mean() / (corpus.split["val"]["src"] != gru.PAD).mean()
    assert unk < 0.05
