"""LSTM sentiment classifier on aclImdb (S1's NLP workload: batch 64; S2 and S4 use the same data), framework-neutral.
 Model: embedding(V, E) -> LSTM (hidden H, `layers` layers, unidirectional, batch first) -> the top layer's output at
each review's last real token -> dense H -> 2. Cross-entropy (mean), Adam.

Padding and masking, the same in both frameworks: every review is cut to its first `max_len` tokens and right-padded
with <pad> (id 0) to exactly max_len, so every batch has one shape (MindSpore GRAPH compiles once). The LSTM runs over
the padded sequence; the classifier reads its output at position length - 1. An LSTM is causal, so the trailing pads
cannot change that output: the pads are masked out of the result exactly, without a packed sequence. An empty review
is one <unk>.

Tokenisation: lowercase, `<br />` as a space, then the words of TOKEN (letters and digits with inner apostrophes).
The vocabulary is built from the train split only: <pad>, <unk>, then the `vocab` most frequent words seen at least
`min_freq` times (ties alphabetical). The test split is encoded with it (unseen words -> <unk>). aclImdb has no
validation split: 'val' evaluates the test split, as for CIFAR-10.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.config.spec import ModelSpec

# contracts.ModelPackage: how the model trains, in the event log's words (harness.results.mlperf logs them).
MLPERF_KEYS = {"opt_name": "adam", "opt_learning_rate_decay_schedule": "constant"}

# contracts.NoAccumulationModel.
NO_ACCUMULATION = "not implemented: no device of the memory table is short of memory for it"

PAD, UNK = 0, 1
TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
PROBE = 8


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower().replace("<br />", " "))


def build_vocab(docs: list[list[str]], size: int, min_freq: int) -> list[str]:
    counts = Counter(tok for doc in docs for tok in doc)
    words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    return ["<pad>", "<unk>", *words[:size]]


def encode(docs: list[list[str]], vocab: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, max_len) int32 ids right-padded with <pad>, and the lengths (>= 1)."""
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.full((len(docs), max_len), PAD, np.int32)
    lengths = np.ones(len(docs), np.int32)
    for i, doc in enumerate(docs):
        row = [index.get(t, UNK) for t in doc[:max_len]] or [UNK]
        ids[i, :len(row)] = row
        lengths[i] = len(row)
    return ids, lengths


class Corpus:
    """Token ids of both splits, the vocabulary from the whole train split; `train_samples` / `eval_samples` of the
    spec take the first N of the (seeded) shuffled train split and of the shuffled test split."""

    def __init__(self, data: dict, hp: Mapping[str, Any], spec: ModelSpec, seed: int):
        train = [tokenize(t) for t in data["train"]["text"]]
        self.vocab = build_vocab(train, int(hp["vocab"]), int(hp["min_freq"]))
        self.split = {}
        for s, limit in (("train", spec.train_samples), ("test", spec.eval_samples)):
            # Both splits are ordered by label: a seeded shuffle makes any prefix balanced-ish.
            n = len(data[s]["label"])
            order = np.random.RandomState(seed).permutation(n)[:limit or n]
            docs = [train[i] if s == "train" else tokenize(data[s]["text"][i]) for i in order]
            ids, lengths = encode(docs, self.vocab, int(hp["max_len"]))
            self.split[s] = {"ids": ids, "last": lengths - 1, "label": data[s]["label"][order].astype(np.int32)}
        self.n_train, self.n_test = len(self.split["train"]["label"]), len(self.split["test"]["label"])

    def train_batches(self, batch: int, seed: int, epoch: int):
        """Shuffled whole batches (the last partial batch is dropped: one shape for every step)."""
        order = np.random.RandomState([seed, epoch]).permutation(self.n_train)
        a = self.split["train"]
        for i in range(self.n_train // batch):
            idx = order[i * batch:(i + 1) * batch]
            yield a["ids"][idx], a["last"][idx], a["label"][idx]

    def eval_batches(self, batch: int):
        """The test split in order as (ids, last, labels, valid) batches of exactly `batch` rows; the last is filled
        with copies of row 0, and `valid` says how many rows are real."""
        a = self.split["test"]
        for i in range(0, self.n_test, batch):
            idx = np.arange(i, min(i + batch, self.n_test))
            full = np.concatenate([idx, np.zeros(batch - len(idx), np.int64)])
            yield a["ids"][full], a["last"][full], a["label"][idx], len(idx)

    def probe(self, split: str):
        a = self.split[split]
        return a["ids"][:PROBE], a["last"][:PROBE], a["label"][:PROBE]


def pass_batch(workload, data: dict, batch: int) -> tuple[np.ndarray, ...]:
    """contracts.PassesModel: the first `batch` rows of the workload's training split (ids, last, label)."""
    a = workload.corpus.split["train"]
    return a["ids"][:batch], a["last"][:batch], a["label"][:batch]


def init_weights(seed: int, vocab: int, emb: int, hidden: int, layers: int, classes: int = 2) -> dict[str, np.ndarray]:
    """Embedding N(0, 1) (both frameworks' default); LSTM and dense U(-1/sqrt(H), 1/sqrt(H)) (torch's defaults). LSTM
    weights in the layout torch.nn.LSTM and mindspore.nn.LSTM share: weight_ih_lK (4H, in), weight_hh_lK (4H, H),
    biases (4H,), gate blocks in the order input, forget, cell, output."""
    rng = np.random.RandomState(seed)
    k = 1.0 / np.sqrt(hidden)

    def u(*shape):
        return rng.uniform(-k, k, shape).astype(np.float32)

    w = {"embedding.weight": rng.standard_normal((vocab, emb)).astype(np.float32)}
    for layer in range(layers):
        inp = emb if layer == 0 else hidden
        w.update({f"lstm.weight_ih_l{layer}": u(4 * hidden, inp), f"lstm.weight_hh_l{layer}": u(4 * hidden, hidden),
                  f"lstm.bias_ih_l{layer}": u(4 * hidden), f"lstm.bias_hh_l{layer}": u(4 * hidden)})
    w.update({"fc.weight": u(classes, hidden), "fc.bias": u(classes)})
    return w
