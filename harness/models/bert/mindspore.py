"""BERT masked-LM pre-training in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built): nn.Dense /
nn.LayerNorm / nn.Embedding cells, mindspore.experimental.optim.AdamW (torch.optim.AdamW's update, bias-corrected;
nn.AdamWeightDecay has no bias correction) with its LambdaLR warm-up, and the harness's TrainOneStepCell-style
training cell (harness.models._mindspore.make_train_step). See harness/models/bert.

Parameter names differ from torch's only in MindSpore's own spellings (LayerNorm gamma/beta, Embedding's
embedding_table), mapped by `torch_name`; nn.Dense keeps torch's (out, in) weight layout.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.experimental import optim

from harness.models import bert
from harness.models._mindspore import amp_network, make_train_step
from harness.models.bert import LN_EPS, LOSS_EPS, MASK_NEG

RENAME = {"gamma": "weight", "beta": "bias", "embedding_table": "weight"}


def torch_name(name: str) -> str:
    head, _, last = name.rpartition(".")
    return f"{head}.{RENAME.get(last, last)}" if head else name


def _norm(h: int) -> nn.LayerNorm:
    return nn.LayerNorm((h,), epsilon=LN_EPS)


class Attention(nn.Cell):
    def __init__(self, h: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.size = heads, h // heads
        self.scale = 1.0 / math.sqrt(h // heads)
        self.query, self.key, self.value, self.out = (nn.Dense(h, h) for _ in range(4))
        self.dropout = nn.Dropout(p=dropout)

    def construct(self, x, bias):
        b, s, h = x.shape
        q = self.query(x).reshape(b, s, self.heads, self.size).transpose(0, 2, 1, 3)
        k = self.key(x).reshape(b, s, self.heads, self.size).transpose(0, 2, 1, 3)
        v = self.value(x).reshape(b, s, self.heads, self.size).transpose(0, 2, 1, 3)
        scores = ops.matmul(q, k.transpose(0, 1, 3, 2)) * self.scale + bias.astype(q.dtype)
        probs = self.dropout(ops.softmax(scores.astype(ms.float32), axis=-1).astype(v.dtype))
        return self.out(ops.matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, s, h))


class Layer(nn.Cell):
    def __init__(self, h: int, heads: int, inter: int, dropout: float):
        super().__init__()
        self.attention = Attention(h, heads, dropout)
        self.attention_norm = _norm(h)
        self.up, self.down = nn.Dense(h, inter), nn.Dense(inter, h)
        self.output_norm = _norm(h)
        self.dropout = nn.Dropout(p=dropout)

    def construct(self, x, bias):
        x = self.attention_norm(x + self.dropout(self.attention(x, bias)))
        return self.output_norm(x + self.dropout(self.down(ops.gelu(self.up(x), approximate="none"))))


class Embeddings(nn.Cell):
    def __init__(self, vocab: int, h: int, length: int, dropout: float):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(vocab, h), nn.Embedding(length, h), \
            nn.Embedding(2, h)
        self.norm = _norm(h)
        self.dropout = nn.Dropout(p=dropout)

    def construct(self, ids):
        pos = ops.arange(ids.shape[1], dtype=ms.int32)
        x = self.word(ids) + self.position(pos) + self.token_type(ops.zeros_like(ids))
        return self.dropout(self.norm(x))


class Head(nn.Cell):
    """The MLM head; its decoder is the word embedding table (tied), plus a bias of its own."""

    def __init__(self, h: int, vocab: int):
        super().__init__()
        self.dense, self.norm = nn.Dense(h, h), _norm(h)
        self.bias = Parameter(Tensor(np.zeros(vocab, np.float32)), name="bias")

    def construct(self, x, word):
        y = self.norm(ops.gelu(self.dense(x), approximate="none"))
        return ops.matmul(y, word.astype(y.dtype).T) + self.bias.astype(y.dtype)


class BertMLM(nn.Cell):
    def __init__(self, w: dict, hp: dict):
        super().__init__()
        vocab, h = w["embeddings.word.weight"].shape
        d = float(hp["dropout"])
        self.embeddings = Embeddings(vocab, h, int(hp["max_len"]), d)
        self.layers = nn.CellList([Layer(h, int(hp["heads"]), int(hp["intermediate"]), d)
                                   for _ in range(int(hp["layers"]))])
        self.head = Head(h, vocab)
        params = {torch_name(n): p for n, p in self.parameters_and_names()}
        if set(params) != set(w):
            raise RuntimeError(f"weight names differ: {sorted(set(params) ^ set(w))[:6]}")
        for name, p in params.items():
            p.set_data(Tensor(w[name]))

    def construct(self, ids, keys, positions):
        """Logits (B * P, V) at the flat masked positions."""
        bias = ((1.0 - keys) * MASK_NEG).reshape(keys.shape[0], 1, 1, keys.shape[1])
        x = self.embeddings(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.head(ops.gather(x.reshape(-1, x.shape[-1]), positions, 0), self.embeddings.word.embedding_table)


class LossCell(nn.Cell):
    """The weighted mean cross-entropy over the masked positions (BERT's masked_lm loss), in fp32."""

    def __init__(self, net: nn.Cell):
        super().__init__()
        self.net = net

    def construct(self, ids, keys, positions, labels, weights):
        ce = ops.cross_entropy(self.net(ids, keys, positions).astype(ms.float32), labels, reduction="none")
        return (ce * weights).sum() / (weights.sum() + LOSS_EPS)


def _tensors(ids, keys, pos, labels, weights) -> list[Tensor]:
    i32, f32 = np.int32, np.float32
    return [Tensor(np.asarray(a).astype(t)) for a, t in ((ids, i32), (keys, f32), (pos, i32), (labels, i32),
                                                          (weights, f32))]


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.epoch = ctx, 0
        self.batch, self.corpus, w, total = bert.prepare(ctx, data)
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        self.net = BertMLM(w, hp)
        self.run_net = amp_network(ctx, self.net)  # AMP off: the network itself
        self.loss_cell = LossCell(self.run_net)
        self.fp32_loss = LossCell(self.net)
        named = [(torch_name(p.name), p) for p in self.net.trainable_params()]
        self.opt = optim.AdamW(bert.param_groups(named, hp["weight_decay"]), lr=hp["lr"],
                               betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=bert.ADAM_EPS)
        self.sched = optim.lr_scheduler.LambdaLR(self.opt, lambda s: bert.lr_factor(s, hp["warmup_steps"], total))
        self.parts = ctx.accumulation_steps   # micro-batches a step (harness.devices.memory.plan)
        self.step = make_train_step(ctx, self.loss_cell, self.opt, accumulation_steps=self.parts)

    def train_epoch(self) -> float:
        self.net.set_train(True)
        losses = []
        for batch in self.corpus.train_batches(self.batch, self.epoch):
            if self.parts == 1:
                losses.append(self.step(*_tensors(*batch)))
            else:
                losses.append(self.step([(_tensors(*part), share)
                                         for part, share in bert.micro_batches(batch, self.parts)]))
            self.sched.step()
        self.epoch += 1
        return float(np.mean([loss.asnumpy() for loss in losses]))

    def evaluate(self, split: str) -> float:
        """Masked-token accuracy on the test split's fixed masks ('val' is the test split too)."""
        self.net.set_train(False)
        right = total = 0.0
        for batch in self.corpus.eval_batches(self.batch):
            labels, weights = batch[3], batch[4]
            pred = self.run_net(*_tensors(*batch)[:3]).asnumpy().argmax(1)
            right += float(((pred == labels) * weights).sum())
            total += float(weights.sum())
        return right / max(total, 1.0)

    def probe_forward(self) -> np.ndarray:
        self.net.set_train(False)
        return self.net(*_tensors(*self.corpus.probe("test"))[:3]).asnumpy()

    def probe_step(self) -> float:
        """One fp32 step at PROBE_LR (the schedule left out: its factor is 1 for this step)."""
        for g in self.opt.param_groups:
            g["lr"].set_data(Tensor(np.float32(bert.PROBE_LR)))
        self.net.set_train(True)
        step = make_train_step(self.ctx, self.fp32_loss, self.opt)
        return float(step(*_tensors(*self.corpus.probe("train"))).asnumpy())

    def probe_loss(self) -> float:
        self.net.set_train(False)
        return float(self.fp32_loss(*_tensors(*self.corpus.probe("train"))).asnumpy())

    def state_arrays(self) -> list:
        return [p.asnumpy() for p in self.net.trainable_params()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Cell) -> nn.Cell:
    """contracts.PassesModelModule: the loss the network trains with."""
    return LossCell(net)
