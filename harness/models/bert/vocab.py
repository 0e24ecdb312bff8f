"""BERT's vocabulary and token ids for the aclImdb reviews.

Real reviews: a WordPiece vocabulary trained with Hugging Face `tokenizers` (the Rust library behind the BERT
tokenisers, hash-locked in requirements/*.txt) on the training split only: BERT's normaliser (lowercase, accents
kept, control characters removed, `<br />` made a space first) and pre-tokeniser (whitespace and punctuation),
`vocab` tokens of which the first five are the specials, pieces seen at least `min_freq` times. The vocabulary
is the same on every run (tests/test_bert.py checks); it takes some seconds on 2 cores for
the 25,000 reviews.

The synthetic stand-in (harness.data.imdb.synthetic, which marks its dict `synthetic`) is made of a closed
vocabulary of words, each of which would be one WordPiece token: it is split into those words by the LSTM's
tokeniser (harness.models.lstm.tokenize), so that it needs no tokeniser library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.models.lstm import build_vocab, tokenize

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _clean(text: str) -> str:
    return text.replace("<br />", " ")


def wordpiece(texts: list[str], size: int, min_freq: int):
    """The trained tokenizers.Tokenizer."""
    try:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    except ImportError:
        raise HarnessError("bert: the real aclImdb corpus needs the `tokenizers` package (requirements/*.txt); "
                           "install it, or run with --synthetic imdb") from None
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))  # noqa: S106 (a token)
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=size, min_frequency=min_freq, special_tokens=SPECIALS,
                                        show_progress=False, continuing_subword_prefix="##")
    tok.train_from_iterator([_clean(t) for t in texts], trainer=trainer)
    # The trainer's set of pieces is the same on every run, but it numbers the alphabet in a hash map's order, which
    # changes from run to run: the ids are renumbered, the specials first, then the pieces in sorted order.
    pieces = sorted(set(tok.get_vocab()) - set(SPECIALS))
    tok.model = models.WordPiece({t: i for i, t in enumerate(SPECIALS + pieces)}, unk_token="[UNK]",  # noqa: S106
                                 max_input_chars_per_word=100, continuing_subword_prefix="##")
    return tok


def _frame(rows: list[list[int]], max_len: int) -> np.ndarray:
    """[CLS] + the first max_len - 2 ids + [SEP], right-padded with [PAD]: (N, max_len) int32."""
    out = np.zeros((len(rows), max_len), np.int32)  # [PAD] is 0
    for i, row in enumerate(rows):
        seq = [SPECIALS.index("[CLS]"), *row[:max_len - 2], SPECIALS.index("[SEP]")]
        out[i, :len(seq)] = seq
    return out


def encode_reviews(data: dict, orders: Mapping[str, np.ndarray], hp: Mapping[str, Any],
                   max_len: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """(vocabulary, {split: (N, max_len) ids of the reviews at `orders[split]`}); the vocabulary from the whole
    train split."""
    size, min_freq = int(hp["vocab"]), int(hp["min_freq"])
    if data.get("synthetic"):
        words = build_vocab([tokenize(t) for t in data["train"]["text"]], size - len(SPECIALS), min_freq)[2:]
        vocab = SPECIALS + words
        index = {w: i for i, w in enumerate(vocab)}
        unk = SPECIALS.index("[UNK]")
        rows = {s: [[index.get(w, unk) for w in tokenize(data[s]["text"][j])] for j in order]
                for s, order in orders.items()}
    else:
        tok = wordpiece(data["train"]["text"], size, min_freq)
        vocab = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
        rows = {s: [e.ids for e in tok.encode_batch([_clean(data[s]["text"][j]) for j in order],
                                                    add_special_tokens=False)]
                for s, order in orders.items()}
    if vocab[:len(SPECIALS)] != SPECIALS:
        raise HarnessError(f"bert: the vocabulary does not start with {SPECIALS}")
    return vocab, {s: _frame(r, max_len) for s, r in rows.items()}
