"""GRU encoder-decoder in PyTorch (eager)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models._pytorch import compiled, device_batches, mixed_precision, optimizer_options, prefetch_depth
from harness.models.gru import PAD, Corpus, bleu, greedy_decode, init_weights


def _gru(w: dict, prefix: str) -> nn.GRU:
    hidden, inp = w[f"{prefix}_w_ih"].shape[0] // 3, w[f"{prefix}_w_ih"].shape[1]
    gru = nn.GRU(inp, hidden, num_layers=1, batch_first=True)
    with torch.no_grad():
        for ours, theirs in (("w_ih", "weight_ih_l0"), ("w_hh", "weight_hh_l0"), ("b_ih", "bias_ih_l0"),
                             ("b_hh", "bias_hh_l0")):
            getattr(gru, theirs).copy_(torch.from_numpy(w[f"{prefix}_{ours}"]))
    return gru


class Seq2Seq(nn.Module):
    def __init__(self, w: dict):
        super().__init__()
        self.enc_emb = nn.Embedding.from_pretrained(torch.from_numpy(w["enc_emb"].copy()), freeze=False)
        self.encoder = _gru(w, "enc")
        self.dec_emb = nn.Embedding.from_pretrained(torch.from_numpy(w["dec_emb"].copy()), freeze=False)
        self.decoder = _gru(w, "dec")
        self.out = nn.Linear(*w["out_w"].shape[::-1])
        with torch.no_grad():
            self.out.weight.copy_(torch.from_numpy(w["out_w"]))
            self.out.bias.copy_(torch.from_numpy(w["out_b"]))

    def encode(self, src: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """The encoder's state at each row's source <eos>: (B, H)."""
        out, _ = self.encoder(self.enc_emb(src))
        return out[torch.arange(src.shape[0], device=src.device), last]

    def decode(self, tgt_in: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.dec_emb(tgt_in)
        out, h_n = self.decoder(x, h.unsqueeze(0).to(x.dtype))
        return self.out(out), h_n[0]

    def forward(self, src, last, tgt_in):
        return self.decode(tgt_in, self.encode(src, last))[0]


def masked_ce(logits: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the non-<pad> target tokens (fp32)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt_out.reshape(-1).long(),
                           ignore_index=PAD)


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx = ctx
        self.dev = device_of(ctx)
        self.corpus = Corpus(data, hp, ctx.cell.spec)
        self.samples_per_epoch = self.corpus.n_train
        self.batch_size = hp["batch"]
        self.clip = hp["clip_norm"]
        self.seed = ctx.seed
        self.epoch = 0
        w = init_weights(ctx.seed, len(self.corpus.src_vocab), len(self.corpus.tgt_vocab), hp["embedding"],
                         hp["hidden"])
        self.net = Seq2Seq(w).to(self.dev)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp["lr"], betas=(hp["adam_beta1"], hp["adam_beta2"]),
                                    eps=hp["adam_eps"], weight_decay=0.0, **optimizer_options(ctx, "Adam"))
        self.prefetch = prefetch_depth(ctx)
        # AMP (autocast + GradScaler, or apex O2 on Ascend) sees the bare model, before torch.compile.
        self.net, self.opt, self.amp = mixed_precision(ctx, self.net, self.opt)
        self.train_net = compiled(ctx, self.net)  # torch.compile'd training forward in compile mode

    def _tensors(self, arrays) -> list[torch.Tensor]:
        return [torch.from_numpy(a).long().to(self.dev) for a in arrays]

    def _step(self, tensors, amp: bool = True) -> torch.Tensor:
        src, last, tgt_in, tgt_out = tensors
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        with self.amp.autocast(enabled=amp):
            loss = masked_ce(self.train_net(src, last, tgt_in), tgt_out)
        self.amp.backward(loss)
        self.amp.clip_(self.net.parameters(), self.clip)
        self.amp.step()
        return loss.detach()

    def train_epoch(self) -> float:
        return self.train_part(0, 1)[0]

    def train_part(self, part: int, parts: int) -> tuple[float, int]:
        batches = self.corpus.epoch_part(self.batch_size, self.seed, self.epoch, part, parts)
        with self.train_batches(batches) as device:
            losses = [self._step(b) for b in device]
        if part == parts - 1:
            self.epoch += 1
        return torch.stack(losses).mean().item(), sum(len(idx) for idx in batches)

    def train_batches(self, batches=None):
        """The training batches (index arrays; default: this epoch's) on the device
        (harness.models._pytorch.device_batches)."""
        if batches is None:
            batches = self.corpus.epoch_part(self.batch_size, self.seed, self.epoch, 0, 1)
        return device_batches(self.ctx, self.dev, (self.corpus.batch("train", idx, self.batch_size) for idx in batches),
                              lambda b: tuple(torch.from_numpy(a).long() for a in b),
                              lambda t, nb: tuple(a.to(self.dev, non_blocking=nb) for a in t), self.prefetch)

    def probe_forward(self) -> np.ndarray:
        """Eval-mode teacher-forced logits on the first 8 validation pairs (fp32)."""
        src, last, tgt_in, _ = self._tensors(self.corpus.probe_batch("val"))
        self.net.eval()
        with torch.no_grad():
            return self.net(src, last, tgt_in).float().cpu().numpy()

    def probe_step(self) -> float:
        return self._step(self._tensors(self.corpus.probe_batch("train")), amp=False).item()

    def probe_loss(self) -> float:
        src, last, tgt_in, tgt_out = self._tensors(self.corpus.probe_batch("train"))
        self.net.eval()
        with torch.no_grad():
            return masked_ce(self.net(src, last, tgt_in), tgt_out).item()

    def evaluate(self, split: str) -> float:
        self.net.eval()

        @torch.no_grad()
        def encode_fn(src, last):
            with self.amp.autocast():
                return self.net.encode(*self._tensors((src, last)))

        @torch.no_grad()
        def step_fn(tokens, h):
            with self.amp.autocast():
                logits, h = self.net.decode(self._tensors((tokens,))[0].unsqueeze(1), h)
            return logits[:, 0].float().cpu().numpy(), h

        hyps = greedy_decode(self.corpus, split, self.batch_size, encode_fn, step_fn)
        return bleu(hyps, self.corpus.refs[split])

    def state_arrays(self) -> list:
        return [p.detach().float().cpu().numpy() for p in self.net.parameters()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Module):
    """contracts.PassesModelModule: masked_ce, as training uses it."""
    return lambda src, last, tgt_in, tgt_out: masked_ce(net(src, last, tgt_in), tgt_out)
