"""GRU encoder-decoder (Cho et al. 2014, kept simple) for Multi30K English->French.

Encoder: embedding(src_vocab, E) -> 1-layer GRU (hidden H); its state after the last real source
token (<eos>) initialises the decoder: embedding(tgt_vocab, E) -> 1-layer GRU -> dense H->tgt_vocab.
Teacher forcing in training; cross-entropy over non-<pad> target tokens (mean); Adam; gradient
clipping by global norm, torch's formula (coef = min(1, clip / (norm + 1e-6))) in both frameworks.

Everything here is framework-neutral numpy/Python, so both frameworks get the very same token ids,
batches, batch order and initial weights:

Tokenisation (deterministic): lowercase, then the regex TOKEN below: a word (letters/digits, with
inner hyphens kept: "t-shirt", "peut-être") optionally followed by an apostrophe ("l'", "aujourd'",
"man'"), or any single other non-space character (punctuation). Detokenisation joins with spaces,
but no space after a word ending in an apostrophe, before closing punctuation . , ! ? ; : ) ] } %
or after opening ( [ {. BLEU (sacrebleu, 13a, lowercase) is computed on detokenised greedy decodes
against the raw references.

Shapes are fixed so MindSpore GRAPH mode compiles each function once (and PyTorch does the same
work): every sequence is padded to T = max_len + 1 (source: max_len tokens + <eos>; decoder input
<bos> + max_len tokens; target max_len tokens + <eos>), and every batch has `batch` rows (the
epoch's last partial batch is filled with all-<pad> rows, which carry no loss). The encoder runs over
the padded source; its output at each row's <eos> position is the sentence's state (a GRU is causal,
so the trailing pads do not change it).

Source reversal (hparam `reverse_source`, off unless set): the source tokens are fed last to first (the
<eos> stays after them), as Sutskever et al. (2014) do: without attention, the first target words then sit
close to the source words they translate, and training gets going sooner. Both frameworks get the same ids.
 Length buckets (hparam `buckets`, a list of widths; off unless set): a training batch is then cut to the
narrowest width that holds every row's source and target with their <eos>, and each epoch's batches are
made within one bucket (the epoch's permutation split by bucket, then the batches shuffled), so a short
sentence does not pay for a 40-token one. The shapes stay few and fixed (one per width: MindSpore GRAPH
compiles each once); validation and test batches keep the full width T.
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
NO_ACCUMULATION = ("not implemented: its loss is a mean over the batch's non-padding tokens (micro-batches would need "
                   "shares by token count) and its buckets give batches of several shapes")

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
TOKEN = re.compile(r"\w+(?:-\w+)*'?|[^\w\s]")
_CLOSING = set(".,!?;:)]}%")
_OPENING = set("([{")


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def detokenize(tokens: list[str]) -> str:
    out = ""
    prev = None
    for tok in tokens:
        glue = prev is None or tok in _CLOSING or prev in _OPENING or (len(prev) > 1 and prev.endswith("'"))
        out += tok if glue else " " + tok
        prev = tok
    return out


def build_vocab(sentences: list[list[str]], min_freq: int) -> list[str]:
    """Specials, then every token seen at least min_freq times, by falling count then alphabetically."""
    counts = Counter(tok for sent in sentences for tok in sent)
    words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    return SPECIALS + words


def encode(sentences: list[list[str]], vocab: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, max_len) int32 ids, right-padded with <pad>, truncated to max_len tokens; and the lengths."""
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.full((len(sentences), max_len), PAD, np.int32)
    lengths = np.zeros(len(sentences), np.int32)
    for i, sent in enumerate(sentences):
        row = [index.get(tok, UNK) for tok in sent[:max_len]]
        ids[i, :len(row)] = row
        lengths[i] = len(row)
    return ids, lengths


def reverse_rows(ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each row's first `length` ids in reverse order (the pads stay at the end)."""
    pos = np.arange(ids.shape[1])
    src = np.where(pos < lengths[:, None], lengths[:, None] - 1 - pos, pos)
    return np.take_along_axis(ids, src, axis=1)


class Corpus:
    """Token ids of every split, as fixed-shape arrays with one all-<pad> row appended (index N), which
    fills the last batch. Vocabularies come from the whole training split (min_freq)."""

    def __init__(self, data: dict, hp: Mapping[str, Any], spec: ModelSpec):
        max_len = hp["max_len"]
        self.T = max_len + 1
        tok = {s: {lang: [tokenize(x) for x in data[s][lang]] for lang in ("en", "fr")} for s in data}
        self.src_vocab = build_vocab(tok["train"]["en"], hp["min_freq"])
        self.tgt_vocab = build_vocab(tok["train"]["fr"], hp["min_freq"])
        # val_samples: a fixed subset (the first N pairs) for the per-epoch validation BLEU, where greedy
        # decoding of the whole set would weigh on time to target; the test BLEU stays on eval_samples.
        val = spec.eval_samples if spec.val_samples is None else spec.val_samples
        limits = {"train": spec.train_samples, "val": val, "test": spec.eval_samples}
        self.split = {}
        self.refs = {}
        for s in ("train", "val", "test"):
            n = limits[s] or len(tok[s]["en"])
            src, src_len = encode(tok[s]["en"][:n], self.src_vocab, max_len)
            if hp.get("reverse_source"):
                src = reverse_rows(src, src_len)
            tgt, tgt_len = encode(tok[s]["fr"][:n], self.tgt_vocab, max_len)
            n = len(src)
            a = {
                "src": np.full((n + 1, self.T), PAD, np.int32),
                "last": np.zeros(n + 1, np.int32),            # index of the source <eos>
                "tgt_in": np.full((n + 1, self.T), PAD, np.int32),
                "tgt_out": np.full((n + 1, self.T), PAD, np.int32),
            }
            rows = np.arange(n)
            a["src"][:n, :max_len] = src
            a["src"][rows, src_len] = EOS
            a["last"][:n] = src_len
            a["tgt_in"][:n, 0] = BOS
            a["tgt_in"][:n, 1:] = tgt
            a["tgt_out"][:n, :max_len] = tgt
            a["tgt_out"][rows, tgt_len] = EOS
            self.split[s] = a
            self.refs[s] = list(data[s]["fr"][:n])
        self.n_train = len(self.refs["train"])
        # Width each training row needs (source and target tokens + <eos>), and the bucket widths.
        need = np.maximum(self.split["train"]["last"], (self.split["train"]["tgt_out"] != PAD).sum(1) - 1) + 1
        self.widths = sorted({int(w) for w in hp.get("buckets", []) if int(w) < self.T} | {self.T})
        self.bucket = np.searchsorted(self.widths, need[:self.n_train])   # bucket index of every training row

    def batch(self, split: str, idx: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
        """Rows idx of a split, filled up to `size` rows with the all-<pad> row."""
        a = self.split[split]
        full = np.full(size, len(a["last"]) - 1, np.int64)
        full[:len(idx)] = idx
        width = self.widths[self.bucket[idx].max()] if split == "train" and len(idx) else self.T
        return a["src"][full, :width], a["last"][full], a["tgt_in"][full, :width], a["tgt_out"][full, :width]

    def epoch_batches(self, batch: int, seed: int, epoch: int) -> list[np.ndarray]:
        rng = np.random.RandomState(seed + epoch)
        order = rng.permutation(self.n_train)
        if len(self.widths) == 1:
            return [order[i:i + batch] for i in range(0, self.n_train, batch)]
        batches = []
        for k in range(len(self.widths)):
            rows = order[self.bucket[order] == k]
            batches += [rows[i:i + batch] for i in range(0, len(rows), batch)]
        return [batches[i] for i in rng.permutation(len(batches))]

    def epoch_part(self, batch: int, seed: int, epoch: int, part: int, parts: int) -> list[np.ndarray]:
        """The part-th of `parts` consecutive slices of an epoch's batches (all of them when parts is 1)."""
        batches = self.epoch_batches(batch, seed, epoch)
        n = len(batches)
        return batches[n * part // parts:n * (part + 1) // parts]

    def probe_batch(self, split: str) -> tuple[np.ndarray, ...]:
        """The first 8 pairs of a split (the probes' fixed batch)."""
        return self.batch(split, np.arange(min(8, len(self.refs[split]))), 8)


def pass_batch(workload, data: dict, batch: int) -> tuple[np.ndarray, ...]:
    """contracts.PassesModel: the first `batch` training pairs of the workload's corpus (src, last, tgt_in, tgt_out)."""
    return workload.corpus.batch("train", np.arange(batch), batch)


def init_weights(seed: int, src_vocab: int, tgt_vocab: int, emb: int, hidden: int) -> dict[str, np.ndarray]:
    """Initial weights, made once from the seed and loaded into either framework. GRU weights in the
    layout both torch.nn.GRU and mindspore.nn.GRU use: weight_ih (3H, in), weight_hh (3H, H), biases
    (3H,), gate blocks in the order reset, update, new. Embeddings N(0, 1) (both frameworks' default);
    GRU and dense U(-1/sqrt(H), 1/sqrt(H)) (torch's defaults)."""
    rng = np.random.RandomState(seed)
    k = 1.0 / np.sqrt(hidden)

    def u(*shape):
        return rng.uniform(-k, k, shape).astype(np.float32)

    w = {"enc_emb": rng.standard_normal((src_vocab, emb)).astype(np.float32)}
    w.update({"enc_w_ih": u(3 * hidden, emb), "enc_w_hh": u(3 * hidden, hidden), "enc_b_ih": u(3 * hidden),
              "enc_b_hh": u(3 * hidden)})
    w["dec_emb"] = rng.standard_normal((tgt_vocab, emb)).astype(np.float32)
    w.update({"dec_w_ih": u(3 * hidden, emb), "dec_w_hh": u(3 * hidden, hidden), "dec_b_ih": u(3 * hidden),
              "dec_b_hh": u(3 * hidden)})
    w.update({"out_w": u(tgt_vocab, hidden), "out_b": u(tgt_vocab)})
    return w


def greedy_decode(corpus: Corpus, split: str, batch: int, encode_fn, step_fn) -> list[str]:
    """Greedy decodes of a split, detokenised. encode_fn(src, last) -> state; step_fn(tokens (B,), state)
    -> (logits (B, V) numpy, state); decoding stops at <eos> or after T steps."""
    n = len(corpus.refs[split])
    hyps = []
    for start in range(0, n, batch):
        idx = np.arange(start, min(start + batch, n))
        src, last, _, _ = corpus.batch(split, idx, batch)
        state = encode_fn(src, last)
        tokens = np.full(batch, BOS, np.int32)
        out = np.zeros((batch, corpus.T), np.int32)
        done = np.zeros(batch, bool)
        done[len(idx):] = True
        for t in range(corpus.T):
            logits, state = step_fn(tokens, state)
            tokens = logits.argmax(-1).astype(np.int32)
            out[:, t] = tokens
            done |= tokens == EOS
            if done.all():
                break
        for row in out[:len(idx)]:
            words = []
            for i in row:
                if i == EOS:
                    break
                words.append(corpus.tgt_vocab[i])
            hyps.append(detokenize(words))
    return hyps


def bleu(hyps: list[str], refs: list[str]) -> float:
    """Corpus BLEU (sacrebleu defaults: 13a tokenisation), lowercased on both sides."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score)
