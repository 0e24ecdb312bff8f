"""LSTM sentiment classifier in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built).
 mindspore.nn.LSTM keeps weight_ih_lK (4H, in), weight_hh_lK (4H, H), bias_ih_lK, bias_hh_lK with torch's gate order
(input, forget, cell, output), so the shared weights load unchanged (tests/test_equivalence.py checks the outputs).
nn.Adam with weight_decay 0 is torch.optim.Adam's update.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models._mindspore import amp_network, make_train_step
from harness.models.lstm import Corpus, init_weights
from harness.models.lstm.pytorch import PROBE_LR


class LSTMClassifier(nn.Cell):
    def __init__(self, w: dict, layers: int):
        super().__init__()
        vocab, emb = w["embedding.weight"].shape
        hidden = w["lstm.weight_hh_l0"].shape[1]
        self.embedding = nn.Embedding(vocab, emb, embedding_table=Tensor(w["embedding.weight"]))
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, has_bias=True, batch_first=True, bidirectional=False)
        for layer in range(layers):
            for plist, kind in ((self.lstm.w_ih_list, "weight_ih"), (self.lstm.w_hh_list, "weight_hh"),
                                (self.lstm.b_ih_list, "bias_ih"), (self.lstm.b_hh_list, "bias_hh")):
                plist[layer].set_data(Tensor(w[f"lstm.{kind}_l{layer}"]))
        self.fc = nn.Dense(hidden, w["fc.weight"].shape[0], has_bias=True, weight_init=Tensor(w["fc.weight"]),
                           bias_init=Tensor(w["fc.bias"]))

    def construct(self, ids, last):
        out, _ = self.lstm(self.embedding(ids))
        rows = ops.arange(ids.shape[0], dtype=ms.int32)
        return self.fc(ops.gather_nd(out, ops.stack((rows, last), 1)))  # the last real token's output


class LossCell(nn.Cell):
    def __init__(self, net: nn.Cell):
        super().__init__()
        self.net = net

    def construct(self, ids, last, y):
        return ops.cross_entropy(self.net(ids, last).astype(ms.float32), y)


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.seed = ctx, ctx.seed
        self.batch = int(hp["batch"])
        self.corpus = Corpus(data, hp, ctx.cell.spec, ctx.seed)
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        self.epoch = 0
        w = init_weights(ctx.seed, len(self.corpus.vocab), hp["embedding"], hp["hidden"], hp["layers"])
        self.net = LSTMClassifier(w, hp["layers"])
        self.run_net = amp_network(ctx, self.net)  # AMP off: the network itself
        self.loss_cell = LossCell(self.run_net)
        self.opt = nn.Adam(self.net.trainable_params(), learning_rate=hp["lr"], beta1=hp["adam_beta1"],
                           beta2=hp["adam_beta2"], eps=hp["adam_eps"], weight_decay=0.0)
        self.step = make_train_step(ctx, self.loss_cell, self.opt)

    @staticmethod
    def _tensors(*arrays) -> list[Tensor]:
        return [Tensor(np.asarray(a).astype(np.int32)) for a in arrays]

    def train_epoch(self) -> float:
        self.net.set_train(True)
        losses = [self.step(*self._tensors(*b)) for b in self.corpus.train_batches(self.batch, self.seed, self.epoch)]
        self.epoch += 1
        return float(np.mean([loss.asnumpy() for loss in losses]))

    def evaluate(self, split: str) -> float:
        self.net.set_train(False)
        right = 0
        for ids, last, y, valid in self.corpus.eval_batches(self.batch):
            pred = self.run_net(*self._tensors(ids, last)).asnumpy().argmax(1)[:valid]
            right += int((pred == y).sum())
        return right / self.corpus.n_test

    def probe_forward(self) -> np.ndarray:
        ids, last, _ = self.corpus.probe("test")
        self.net.set_train(False)
        return self.net(*self._tensors(ids, last)).asnumpy()

    def probe_step(self) -> float:
        self.opt.learning_rate.set_data(Tensor(np.float32(PROBE_LR)))
        self.net.set_train(True)
        return float(self.step(*self._tensors(*self.corpus.probe("train"))).asnumpy())

    def probe_loss(self) -> float:
        self.net.set_train(False)
        return float(self.loss_cell(*self._tensors(*self.corpus.probe("train"))).asnumpy())

    def state_arrays(self) -> list:
        return [p.asnumpy() for p in self.net.trainable_params()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Cell) -> nn.Cell:
    """contracts.PassesModelModule: the loss the network trains with."""
    return LossCell(net)
