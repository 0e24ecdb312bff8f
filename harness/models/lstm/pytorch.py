"""LSTM sentiment classifier in PyTorch (eager, or torch.compile'd in compile mode)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models._pytorch import compiled, device_batches, mixed_precision, optimizer_options, prefetch_depth
from harness.models.lstm import Corpus, init_weights

PROBE_LR = 1e-3


class LSTMClassifier(nn.Module):
    def __init__(self, w: dict, layers: int):
        super().__init__()
        vocab, emb = w["embedding.weight"].shape
        hidden = w["lstm.weight_hh_l0"].shape[1]
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, bias=True, batch_first=True, bidirectional=False)
        self.fc = nn.Linear(hidden, w["fc.weight"].shape[0], bias=True)
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(torch.from_numpy(w[name]))

    def forward(self, ids, last):
        out, _ = self.lstm(self.embedding(ids))
        return self.fc(out[torch.arange(ids.shape[0], device=ids.device), last])  # the last real token's output


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.seed, self.dev = ctx, ctx.seed, device_of(ctx)
        self.batch = int(hp["batch"])
        self.corpus = Corpus(data, hp, ctx.cell.spec, ctx.seed)
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        self.epoch = 0
        w = init_weights(ctx.seed, len(self.corpus.vocab), hp["embedding"], hp["hidden"], hp["layers"])
        self.net = LSTMClassifier(w, hp["layers"]).to(self.dev)
        if set(w) != set(dict(self.net.named_parameters())):
            raise RuntimeError("weight names differ")
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp["lr"], betas=(hp["adam_beta1"], hp["adam_beta2"]),
                                    eps=hp["adam_eps"], weight_decay=0.0, **optimizer_options(ctx, "Adam"))
        self.prefetch = prefetch_depth(ctx)
        self.net, self.opt, self.amp = mixed_precision(ctx, self.net, self.opt)
        self.run_net = compiled(ctx, self.net)

    def _tensors(self, *arrays):
        return [torch.from_numpy(np.asarray(a)).long().to(self.dev) for a in arrays]

    def _step(self, ids, last, y, amp: bool = True) -> torch.Tensor:
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        with self.amp.autocast(enabled=amp):
            loss = F.cross_entropy(self.run_net(ids, last).float(), y)
        self.amp.backward(loss)
        self.amp.step()
        return loss.detach()

    def train_epoch(self) -> float:
        with self.train_batches() as batches:
            losses = [self._step(*b) for b in batches]
        self.epoch += 1
        return torch.stack(losses).mean().item()

    def train_batches(self):
        """This epoch's training batches on the device (harness.models._pytorch.device_batches)."""
        return device_batches(self.ctx, self.dev, self.corpus.train_batches(self.batch, self.seed, self.epoch),
                              lambda b: tuple(torch.from_numpy(np.asarray(a)).long() for a in b),
                              lambda t, nb: tuple(a.to(self.dev, non_blocking=nb) for a in t), self.prefetch)

    def evaluate(self, split: str) -> float:
        """Accuracy on the (first eval_samples of the shuffled) test split; 'val' is the test split too."""
        self.net.eval()
        right = 0
        with torch.no_grad(), self.amp.autocast():
            for ids, last, y, valid in self.corpus.eval_batches(self.batch):
                pred = self.run_net(*self._tensors(ids, last)).argmax(1)[:valid].cpu().numpy()
                right += int((pred == y).sum())
        return right / self.corpus.n_test

    def probe_forward(self) -> np.ndarray:
        ids, last, _ = self.corpus.probe("test")
        self.net.eval()
        with torch.no_grad():
            return self.net(*self._tensors(ids, last)).float().cpu().numpy()

    def probe_step(self) -> float:
        for g in self.opt.param_groups:
            g["lr"] = PROBE_LR
        return self._step(*self._tensors(*self.corpus.probe("train")), amp=False).item()

    def probe_loss(self) -> float:
        ids, last, y = self._tensors(*self.corpus.probe("train"))
        self.net.eval()
        with torch.no_grad():
            return F.cross_entropy(self.net(ids, last), y).item()

    def state_arrays(self) -> list:
        return [p.detach().cpu().numpy() for p in self.net.parameters()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Module):
    """contracts.PassesModelModule: mean cross-entropy of the logits, the loss it trains with."""
    return lambda ids, last, y: F.cross_entropy(net(ids, last), y)
