"""BERT masked-language-model pre-training (Devlin et al. 2019) on the aclImdb reviews, framework-neutral.
 Model (BERT's, post-LayerNorm): word + position + token-type embeddings -> LayerNorm -> dropout -> `layers` encoder
layers (self-attention with `heads` heads over the real tokens, dense, dropout, residual, LayerNorm; dense to
`intermediate`, GELU, dense, dropout, residual, LayerNorm) -> the MLM head at the masked positions only (dense, GELU,
LayerNorm, then the word embeddings transposed plus a bias: the decoder is tied to the embeddings). Masked-LM only:
no next-sentence prediction (each review is one segment, token type 0), as RoBERTa showed NSP unnecessary.
 Every default that differs between the frameworks is set here, once, for both: LayerNorm eps 1e-12 (BERT's; torch's
default is 1e-5, MindSpore's 1e-7), GELU in its exact erf form, padding keys masked by adding -10000 to their
attention scores (BERT's), AdamW (torch.optim.AdamW / mindspore.experimental.optim.AdamW, both bias-corrected) with
eps 1e-6, betas (0.9, 0.999) and weight decay 0.01 on every weight but the biases and LayerNorm parameters, a linear
warm-up over `warmup_steps` then a linear decay to 0 at the last step. Dropout (`dropout`, on the embeddings, the
attention probabilities and both residual branches) draws from each framework's own RNG; the equivalence and
reference tests run with it at 0.

Data: each review is cut to [CLS] + its first max_len - 2 tokens + [SEP] and right-padded with [PAD] to max_len
(one shape for every batch: GRAPH compiles once). Masks are made here in numpy from the seed, so both frameworks see
identical batches: per sequence, round(15%) of its real tokens (at least one, at most `max_predictions`, BERT's
num_to_predict) are chosen; of those 80% become [MASK], 10% a random token, 10% stay. The batch carries the chosen
positions (flattened over the batch), their original ids and a weight (0 for the unused slots, which point at their
own sequence's first position, its [CLS]), as BERT's own masked_lm_positions / ids / weights: the head and the loss (the
weighted mean cross-entropy) see fixed shapes. Training masks are drawn afresh each epoch (dynamic masking); the
evaluation masks are fixed. The metric is the masked-token accuracy on the test split's first `eval_samples` reviews
('val' evaluates it too: aclImdb has none).

Tokeniser: on the real reviews, a WordPiece vocabulary of `vocab` tokens trained on the train split with Hugging
Face `tokenizers` (harness/models/bert/vocab.py). The synthetic stand-in (harness.data.imdb.synthetic, --synthetic
imdb) is a closed vocabulary of words: it is tokenised into those words (harness.models.lstm.tokenize), needing
no tokeniser library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.config.spec import ModelSpec
from harness.models.bert.vocab import SPECIALS, encode_reviews

# contracts.ModelPackage: how the model trains, in the event log's words (harness.results.mlperf logs them).
MLPERF_KEYS = {"opt_name": "adamw",
               "opt_learning_rate_decay_schedule": "linear warm-up, then linear decay to 0 at the last step"}

PAD, UNK, CLS, SEP, MASK = range(len(SPECIALS))
LN_EPS = 1e-12
ADAM_EPS = 1e-6
MASK_NEG = -10000.0   # added to a padding key's attention score
LOSS_EPS = 1e-5       # the masked-LM loss's denominator is its weights' sum plus this
PROBE = 8
PROBE_LR = 1e-4
NO_DECAY = ("bias", "norm.")  # parameter names (torch layout) that AdamW does not decay: biases and LayerNorms


def mask_batch(ids: np.ndarray, rng: np.random.RandomState, vocab: int, rate: float,
               max_pred: int) -> tuple[np.ndarray, ...]:
    """(masked ids (B, S) int32, key mask (B, S) float32: 1 real / 0 pad, flat positions (B * P,) int32 into the
    (B * S) flattened sequence output, their original ids (B * P,) int32, weights (B * P,) float32).

    Every position, the unused slots' (weight 0) included, lies in its own sequence's span [i * S, (i + 1) * S): an
    unused slot points at its sequence's first position. So a slice of rows [r0, r1) is a batch of its own once
    r0 * S is taken from its positions (Corpus.eval_batches); an unused slot at flat position 0 would fall outside
    every such slice but the first (negative: the third evaluation batch on was out of range)."""
    b, s = ids.shape
    out = ids.copy()
    pos = np.repeat(np.arange(b, dtype=np.int32)[:, None] * s, max_pred, axis=1)  # unused slots: their row's start
    labels = np.zeros((b, max_pred), np.int32)
    weights = np.zeros((b, max_pred), np.float32)
    for i in range(b):
        cand = np.flatnonzero((ids[i] != PAD) & (ids[i] != CLS) & (ids[i] != SEP))  # never a special slot
        n = min(max_pred, max(1, int(round(len(cand) * rate))))
        chosen = np.sort(rng.choice(cand, n, replace=False))
        action = rng.random_sample(n)
        randoms = rng.randint(len(SPECIALS), vocab, n)
        for j, p in enumerate(chosen):
            out[i, p] = MASK if action[j] < 0.8 else (randoms[j] if action[j] < 0.9 else ids[i, p])
        pos[i, :n], labels[i, :n], weights[i, :n] = chosen + i * s, ids[i, chosen], 1.0
    return (out.astype(np.int32), (ids != PAD).astype(np.float32), pos.reshape(-1), labels.reshape(-1),
            weights.reshape(-1))


class Corpus:
    """Token ids of both splits (train: the first `train_samples` of the seeded shuffled train split; test: the first
    `eval_samples` of the shuffled test split), the vocabulary, and the masked batches."""

    def __init__(self, data: dict, hp: Mapping[str, Any], spec: ModelSpec, seed: int):
        self.seed, self.vocab_size = seed, None
        self.max_len, self.rate, self.max_pred = int(hp["max_len"]), float(hp["mask_rate"]), int(hp["max_predictions"])
        orders = {s: np.random.RandomState(seed).permutation(len(data[s]["label"]))[:limit or None]
                  for s, limit in (("train", spec.train_samples), ("test", spec.eval_samples))}
        self.vocab, self.ids = encode_reviews(data, orders, hp, self.max_len)
        self.vocab_size = len(self.vocab)
        self.n_train, self.n_test = len(self.ids["train"]), len(self.ids["test"])
        rng = np.random.RandomState([seed, 1 << 20])  # the fixed evaluation masks
        self.eval_masked = mask_batch(self.ids["test"], rng, self.vocab_size, self.rate, self.max_pred)

    def train_batches(self, batch: int, epoch: int):
        """Shuffled whole batches, masked afresh each epoch (the last partial batch is dropped)."""
        order = np.random.RandomState([self.seed, epoch]).permutation(self.n_train)
        rng = np.random.RandomState([self.seed, epoch, 1])
        for i in range(self.n_train // batch):
            yield mask_batch(self.ids["train"][order[i * batch:(i + 1) * batch]], rng, self.vocab_size, self.rate,
                             self.max_pred)

    def eval_batches(self, batch: int):
        """The test split's fixed masked batches, in order; the last partial batch is dropped (its weights would
        need a second shape). Each batch's positions are made relative to its first row (mask_batch keeps every
        position, used or not, in its own row's span, so they fall in [0, batch * max_len))."""
        ids, keys, pos, labels, weights = self.eval_masked
        p = self.max_pred
        for i in range(self.n_test // batch):
            rows = slice(i * batch, (i + 1) * batch)
            flat = slice(i * batch * p, (i + 1) * batch * p)
            yield ids[rows], keys[rows], pos[flat] - i * batch * self.max_len, labels[flat], weights[flat]

    def probe(self, split: str):
        """The first PROBE sequences of a split, masked with the probe's own fixed masks."""
        rng = np.random.RandomState([self.seed, 2])
        return mask_batch(self.ids[split][:PROBE], rng, self.vocab_size, self.rate, self.max_pred)


def micro_batches(batch: tuple, parts: int) -> list[tuple[tuple, Any]]:
    """contracts.AccumulatingModel: a training batch (ids, keys, positions, labels, weights: numpy, torch or MindSpore)
    as `parts` micro-batches of consecutive sequences, each with its share (w_i + eps) / (w + eps), where w_i is the
    micro-batch's weight sum and w the batch's. The loss is a weighted mean over the masked positions,
    sum(ce * weight) / (w + eps), so the shares times the micro-batches' own losses add up to the batch's loss exactly
    (1 / parts would not: the micro-batches hold different numbers of masked positions). A micro-batch's positions
    are made relative to its first sequence: mask_batch keeps every position in its own sequence's span."""
    if parts == 1:
        return [(batch, 1.0)]
    ids, keys, pos, labels, weights = batch
    b, s = ids.shape[0], ids.shape[1]
    m, p = b // parts, pos.shape[0] // b
    whole = weights.sum() + LOSS_EPS
    out = []
    for i in range(parts):
        rows, flat = slice(i * m, (i + 1) * m), slice(i * m * p, (i + 1) * m * p)
        out.append(((ids[rows], keys[rows], pos[flat] - i * m * s, labels[flat], weights[flat]),
                    (weights[flat].sum() + LOSS_EPS) / whole))
    return out


def steps_total(corpus: Corpus, hp: Mapping[str, Any], spec: ModelSpec) -> int:
    return max(1, corpus.n_train // int(hp["batch"]) * int(spec.epochs or 1))


def lr_factor(step: int, warmup: int, total: int) -> float:
    """BERT's schedule: linear warm-up to the peak over `warmup` steps, then linear decay to 0 at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def param_groups(named: list[tuple[str, Any]], weight_decay: float) -> list[dict]:
    """AdamW's two parameter groups from (torch-layout name, parameter) pairs: weight decay on the weights and
    embeddings, none on the biases and LayerNorms."""
    decays = [not any(k in n for k in NO_DECAY) for n, _ in named]
    return [{"params": [p for (_, p), d in zip(named, decays, strict=True) if d], "weight_decay": weight_decay},
            {"params": [p for (_, p), d in zip(named, decays, strict=True) if not d], "weight_decay": 0.0}]


def prepare(ctx, data: dict) -> tuple[int, Corpus, dict[str, np.ndarray], int]:
    """What both frameworks' workloads start from: (batch, corpus, the initial weights, the schedule's steps)."""
    hp = ctx.hparams
    corpus = Corpus(data, hp, ctx.cell.spec, ctx.seed)
    return int(hp["batch"]), corpus, init_weights(ctx.seed, corpus.vocab_size, hp), steps_total(corpus, hp,
                                                                                                 ctx.cell.spec)


def pass_batch(workload, data: dict, batch: int) -> tuple[np.ndarray, ...]:
    """contracts.PassesModel: the first `batch` training sequences, masked with fixed masks (ids, key mask,
    positions, labels, weights)."""
    rng = np.random.RandomState([workload.corpus.seed, 3])
    c = workload.corpus
    return mask_batch(c.ids["train"][:batch], rng, c.vocab_size, c.rate, c.max_pred)


def init_weights(seed: int, vocab: int, hp: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """BERT's initialisation: every dense and embedding weight N(0, 0.02), biases 0, LayerNorm 1 and 0. Names in the
    torch layout (Linear weight (out, in)), which mindspore.nn.Dense shares."""
    rng = np.random.RandomState(seed)
    h, inter, length = int(hp["hidden"]), int(hp["intermediate"]), int(hp["max_len"])

    def normal(*shape):
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    def dense(prefix, n_out, n_in):
        return {f"{prefix}.weight": normal(n_out, n_in), f"{prefix}.bias": np.zeros(n_out, np.float32)}

    def norm(prefix):
        return {f"{prefix}.weight": np.ones(h, np.float32), f"{prefix}.bias": np.zeros(h, np.float32)}

    w = {"embeddings.word.weight": normal(vocab, h), "embeddings.position.weight": normal(length, h),
         "embeddings.token_type.weight": normal(2, h), **norm("embeddings.norm")}
    for i in range(int(hp["layers"])):
        p = f"layers.{i}"
        for name in ("query", "key", "value", "out"):
            w.update(dense(f"{p}.attention.{name}", h, h))
        w.update({**norm(f"{p}.attention_norm"), **dense(f"{p}.up", inter, h), **dense(f"{p}.down", h, inter),
                  **norm(f"{p}.output_norm")})
    w.update({**dense("head.dense", h, h), **norm("head.norm"), "head.bias": np.zeros(vocab, np.float32)})
    return w
