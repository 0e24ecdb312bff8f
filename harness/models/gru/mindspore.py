"""GRU encoder-decoder in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built).

mindspore.nn.GRU stores weight_ih_l0 (3H, in), weight_hh_l0 (3H, H), bias_ih_l0, bias_hh_l0 with the
gate blocks in torch's order (reset, update, new) and computes h' = n + z * (h - n) = (1 - z) n + z h,
as torch does (mindspore/nn/layer/rnn_cells.py, _gru_cell), so the shared weights load unchanged.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models._mindspore import amp_network, make_train_step
from harness.models.gru import PAD, Corpus, bleu, greedy_decode, init_weights


def _gru(w: dict, prefix: str) -> nn.GRU:
    hidden, inp = w[f"{prefix}_w_ih"].shape[0] // 3, w[f"{prefix}_w_ih"].shape[1]
    gru = nn.GRU(inp, hidden, num_layers=1, has_bias=True, batch_first=True)
    for plist, ours in ((gru.w_ih_list, "w_ih"), (gru.w_hh_list, "w_hh"), (gru.b_ih_list, "b_ih"),
                        (gru.b_hh_list, "b_hh")):
        assert plist[0].shape == w[f"{prefix}_{ours}"].shape, (plist[0].shape, w[f"{prefix}_{ours}"].shape)
        plist[0].set_data(Tensor(w[f"{prefix}_{ours}"]))
    return gru


class Seq2Seq(nn.Cell):
    def __init__(self, w: dict):
        super().__init__()
        self.enc_emb = nn.Embedding(*w["enc_emb"].shape, embedding_table=Tensor(w["enc_emb"]))
        self.encoder = _gru(w, "enc")
        self.dec_emb = nn.Embedding(*w["dec_emb"].shape, embedding_table=Tensor(w["dec_emb"]))
        self.decoder = _gru(w, "dec")
        self.out = nn.Dense(w["out_w"].shape[1], w["out_w"].shape[0], weight_init=Tensor(w["out_w"]),
                            bias_init=Tensor(w["out_b"]))

    def encode(self, src, last):
        """The encoder's state at each row's source <eos>: (B, H)."""
        out, _ = self.encoder(self.enc_emb(src))
        rows = ops.arange(src.shape[0], dtype=ms.int32)
        return ops.gather_nd(out, ops.stack((rows, last), 1))

    def decode(self, tgt_in, h):
        x = self.dec_emb(tgt_in)
        out, h_n = self.decoder(x, ops.expand_dims(h, 0).astype(x.dtype))
        return self.out(out), h_n[0]

    def construct(self, src, last, tgt_in):
        logits, _ = self.decode(tgt_in, self.encode(src, last))
        return logits


class LossCell(nn.Cell):
    """Mean cross-entropy over the non-<pad> target tokens (fp32)."""

    def __init__(self, net: nn.Cell):
        super().__init__()
        self.net = net

    def construct(self, src, last, tgt_in, tgt_out):
        logits = self.net(src, last, tgt_in).astype(ms.float32)
        return ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD)


class EncodeCell(nn.Cell):
    def __init__(self, net: Seq2Seq):
        super().__init__()
        self.net = net

    def construct(self, src, last):
        return self.net.encode(src, last)


class StepCell(nn.Cell):
    """One greedy-decoding step: tokens (B,), state (B, H) -> logits (B, V) fp32, state."""

    def __init__(self, net: Seq2Seq):
        super().__init__()
        self.net = net

    def construct(self, tokens, h):
        logits, h = self.net.decode(ops.expand_dims(tokens, 1), h)
        return logits[:, 0].astype(ms.float32), h


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.corpus = Corpus(data, hp, ctx.cell.spec)
        self.samples_per_epoch = self.corpus.n_train
        self.batch_size = hp["batch"]
        self.seed = ctx.seed
        self.epoch = 0
        w = init_weights(ctx.seed, len(self.corpus.src_vocab), len(self.corpus.tgt_vocab), hp["embedding"],
                         hp["hidden"])
        self.net = Seq2Seq(w)
        self.params = self.net.trainable_params()
        # With AMP O2/O3, auto_mixed_precision casts self.net's cells in place and wraps it in a cell that
        # casts its outputs to fp32; the greedy-decoding cells use self.net's methods (cast in place too).
        self.amp_net = amp_network(ctx, self.net)
        self.loss_cell = LossCell(self.amp_net)
        self.encode_cell = EncodeCell(self.net)
        self.step_cell = StepCell(self.net)
        self.opt = nn.Adam(self.params, learning_rate=hp["lr"], beta1=hp["adam_beta1"], beta2=hp["adam_beta2"],
                           eps=hp["adam_eps"], weight_decay=0.0)
        # Forward, backward, clipping (PyTorch's formula), loss scaling and update; one graph in GRAPH mode.
        self.step = make_train_step(ctx, self.loss_cell, self.opt, clip_norm=float(hp["clip_norm"]))

    @staticmethod
    def _tensors(arrays) -> list[Tensor]:
        return [Tensor(a.astype(np.int32)) for a in arrays]

    def train_epoch(self) -> float:
        return self.train_part(0, 1)[0]

    def train_part(self, part: int, parts: int) -> tuple[float, int]:
        self.net.set_train(True)
        batches = self.corpus.epoch_part(self.batch_size, self.seed, self.epoch, part, parts)
        losses = [self.step(*self._tensors(self.corpus.batch("train", idx, self.batch_size))) for idx in batches]
        if part == parts - 1:
            self.epoch += 1
        return float(ops.stack(losses).mean().asnumpy()), sum(len(idx) for idx in batches)  # asnumpy waits

    def probe_forward(self) -> np.ndarray:
        """Eval-mode teacher-forced logits on the first 8 validation pairs (fp32 with AMP off; the probes
        run with AMP off, and with AMP on they go through the cast network)."""
        src, last, tgt_in, _ = self._tensors(self.corpus.probe_batch("val"))
        self.net.set_train(False)
        return self.amp_net(src, last, tgt_in).asnumpy().astype(np.float32)

    def probe_step(self) -> float:
        self.net.set_train(True)
        return float(self.step(*self._tensors(self.corpus.probe_batch("train"))).asnumpy())

    def probe_loss(self) -> float:
        self.net.set_train(False)
        return float(self.loss_cell(*self._tensors(self.corpus.probe_batch("train"))).asnumpy())

    def evaluate(self, split: str) -> float:
        self.net.set_train(False)

        def encode_fn(src, last):
            return self.encode_cell(*self._tensors((src, last)))

        def step_fn(tokens, h):
            logits, h = self.step_cell(Tensor(tokens.astype(np.int32)), h)
            return logits.asnumpy(), h

        hyps = greedy_decode(self.corpus, split, self.batch_size, encode_fn, step_fn)
        return bleu(hyps, self.corpus.refs[split])

    def state_arrays(self) -> list:
        return [p.asnumpy() for p in self.net.trainable_params()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Cell) -> nn.Cell:
    """contracts.PassesModelModule: the loss the network trains with."""
    return LossCell(net)
