"""BERT masked-LM pre-training in PyTorch: nn.Linear / nn.LayerNorm / nn.Embedding modules, torch.optim.AdamW with
a LambdaLR warm-up, the standard loop (eager, or torch.compile'd in compile mode). See harness/models/bert."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models import bert
from harness.models._pytorch import (
    accumulate,
    compiled,
    device_batches,
    mixed_precision,
    optimizer_options,
    prefetch_depth,
)
from harness.models.bert import LN_EPS, LOSS_EPS, MASK_NEG


class Attention(nn.Module):
    def __init__(self, h: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value, self.out = (nn.Linear(h, h) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, bias):
        b, s, h = x.shape

        def split(t):
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        # softmax(q k^T / sqrt(d) + bias) v with dropout on the probabilities, as PyTorch documents it for training:
        # its fused kernel (flash or memory-efficient on a GPU, softmax accumulated in fp32 inside it), not the
        # scores materialised in fp32 by hand, which is what nn.TransformerEncoder runs too.
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype),
                                                 dropout_p=self.dropout.p if self.training else 0.0)
        return self.out(context.transpose(1, 2).reshape(b, s, h))


class Layer(nn.Module):
    def __init__(self, h: int, heads: int, inter: int, dropout: float):
        super().__init__()
        self.attention = Attention(h, heads, dropout)
        self.attention_norm = nn.LayerNorm(h, eps=LN_EPS)
        self.up, self.down = nn.Linear(h, inter), nn.Linear(inter, h)
        self.output_norm = nn.LayerNorm(h, eps=LN_EPS)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, bias):
        x = self.attention_norm(x + self.dropout(self.attention(x, bias)))
        return self.output_norm(x + self.dropout(self.down(F.gelu(self.up(x), approximate="none"))))


class Embeddings(nn.Module):
    def __init__(self, vocab: int, h: int, length: int, dropout: float):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(vocab, h), nn.Embedding(length, h), nn.Embedding(2, h)
        self.norm = nn.LayerNorm(h, eps=LN_EPS)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.dropout(self.norm(self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(ids))))


class Head(nn.Module):
    """The MLM head; its decoder is the word embedding matrix (tied), plus a bias of its own."""

    def __init__(self, h: int, vocab: int):
        super().__init__()
        self.dense, self.norm = nn.Linear(h, h), nn.LayerNorm(h, eps=LN_EPS)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, x, word):
        return self.norm(F.gelu(self.dense(x), approximate="none")) @ word.t() + self.bias


class BertMLM(nn.Module):
    def __init__(self, w: dict, hp: dict):
        super().__init__()
        vocab, h = w["embeddings.word.weight"].shape
        d = float(hp["dropout"])
        self.embeddings = Embeddings(vocab, h, int(hp["max_len"]), d)
        self.layers = nn.ModuleList(Layer(h, int(hp["heads"]), int(hp["intermediate"]), d)
                                    for _ in range(int(hp["layers"])))
        self.head = Head(h, vocab)
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(torch.from_numpy(w[name]))

    def forward(self, ids, keys, positions):
        """Logits (B * P, V) at the flat masked positions."""
        bias = ((1.0 - keys) * MASK_NEG)[:, None, None, :]  # padding keys get no attention
        x = self.embeddings(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.head(x.reshape(-1, x.shape[-1])[positions], self.embeddings.word.weight)


def mlm_loss(logits, labels, weights):
    """The weighted mean cross-entropy over the masked positions (BERT's masked_lm loss), in fp32."""
    ce = F.cross_entropy(logits.float(), labels, reduction="none")
    return (ce * weights).sum() / (weights.sum() + LOSS_EPS)


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.dev, self.epoch = ctx, device_of(ctx), 0
        self.parts = ctx.accumulation_steps   # micro-batches a step (harness.devices.memory.plan)
        self.batch, self.corpus, w, total = bert.prepare(ctx, data)
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        self.net = BertMLM(w, hp).to(self.dev)
        named = list(self.net.named_parameters())
        if set(w) != {n for n, _ in named}:
            raise RuntimeError("weight names differ")
        self.opt = torch.optim.AdamW(bert.param_groups(named, hp["weight_decay"]), lr=hp["lr"],
                                     betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=bert.ADAM_EPS,
                                     **optimizer_options(ctx, "AdamW"))
        self.prefetch = prefetch_depth(ctx)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt,
                                                       lambda s: bert.lr_factor(s, hp["warmup_steps"], total))
        self.net, self.opt, self.amp = mixed_precision(ctx, self.net, self.opt)
        self.run_net = compiled(ctx, self.net)

    # The dtype of each of a batch's arrays (ids, keys, positions, labels, weights) on the device.
    DTYPES = (torch.long, torch.float32, torch.long, torch.long, torch.float32)

    def _tensors(self, ids, keys, pos, labels, weights):
        def t(a, dtype):
            return torch.from_numpy(np.asarray(a)).to(self.dev, dtype)

        return tuple(t(a, d) for a, d in zip((ids, keys, pos, labels, weights), self.DTYPES, strict=True))

    def train_batches(self):
        """This epoch's training batches on the device (harness.models._pytorch.device_batches)."""
        return device_batches(self.ctx, self.dev, self.corpus.train_batches(self.batch, self.epoch),
                              lambda b: tuple(torch.from_numpy(np.asarray(a)).to(d)
                                              for a, d in zip(b, self.DTYPES, strict=True)),
                              lambda t, nb: tuple(a.to(self.dev, non_blocking=nb) for a in t), self.prefetch)

    def _step(self, batch, amp: bool = True) -> torch.Tensor:
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        loss = accumulate(self.amp, bert.micro_batches(batch, self.parts),
                          lambda ids, keys, pos, labels, weights: mlm_loss(self.run_net(ids, keys, pos), labels,
                                                                           weights), amp)
        self.amp.step()
        self.sched.step()
        return loss

    def train_epoch(self) -> float:
        with self.train_batches() as batches:
            losses = [self._step(b) for b in batches]
        self.epoch += 1
        return torch.stack(losses).mean().item()

    def evaluate(self, split: str) -> float:
        """Masked-token accuracy on the test split's fixed masks ('val' is the test split too)."""
        self.net.eval()
        right = total = 0.0
        with torch.no_grad(), self.amp.autocast():
            for ids, keys, pos, labels, weights in self.corpus.eval_batches(self.batch):
                pred = self.run_net(*self._tensors(ids, keys, pos, labels, weights)[:3]).argmax(1).cpu().numpy()
                right += float(((pred == labels) * weights).sum())
                total += float(weights.sum())
        return right / max(total, 1.0)

    def probe_forward(self) -> np.ndarray:
        ids, keys, pos, _, _ = self.corpus.probe("test")
        self.net.eval()
        with torch.no_grad():
            return self.net(*self._tensors(ids, keys, pos, pos, keys)[:3]).float().cpu().numpy()

    def probe_step(self) -> float:
        """One fp32 step at PROBE_LR (the schedule left out: its factor is 1 for this step)."""
        for g in self.opt.param_groups:
            g["lr"] = bert.PROBE_LR
        batch = self.corpus.probe("train")
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        loss = mlm_loss(self.net(*self._tensors(*batch)[:3]), *self._tensors(*batch)[3:])
        loss.backward()
        self.opt.step()
        return loss.item()

    def probe_loss(self) -> float:
        ids, keys, pos, labels, weights = self._tensors(*self.corpus.probe("train"))
        self.net.eval()
        with torch.no_grad():
            return mlm_loss(self.net(ids, keys, pos), labels, weights).item()

    def state_arrays(self) -> list:
        return [p.detach().cpu().numpy() for p in self.net.parameters()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Module):
    """contracts.PassesModelModule: the masked-LM loss the network trains with."""
    return lambda ids, keys, pos, labels, weights: mlm_loss(net(ids, keys, pos), labels, weights)
