"""LSTM sentiment classifier reference loop in MindSpore, written as its model zoo writes its LSTM sentiment
network (models/official/nlp/LSTM: an nn.Cell with nn.Embedding, nn.LSTM and nn.Dense): a loss Cell
(nn.WithLossCell with nn.CrossEntropyLoss), nn.Adam, nn.TrainOneStepCell, one call of the train cell per batch
with per-step Tensors; GRAPH or PYNATIVE, whichever the caller set. The zoo's network reads the concatenated first
and last outputs of a bidirectional LSTM; this one reads the output at each review's last real token, as the
harness and the PyTorch reference do (one unidirectional layer).

Same as the harness cell: the shared initial weights (harness.models.lstm.init_weights), the reviews, vocabulary
and batches in the harness's order (harness.models.lstm.Corpus), the hyperparameters.

AMP: ms.amp.auto_mixed_precision on the network at the given level (no loss scale on CPU); the loss in fp32.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models.lstm import Corpus, init_weights


class SentimentNet(nn.Cell):
    def __init__(self, w: dict, layers: int):
        super().__init__()
        vocab, emb = w["embedding.weight"].shape
        hidden = w["lstm.weight_hh_l0"].shape[1]
        self.embedding = nn.Embedding(vocab, emb, embedding_table=Tensor(w["embedding.weight"]))
        self.encoder = nn.LSTM(emb, hidden, num_layers=layers, has_bias=True, batch_first=True)
        for k in range(layers):
            self.encoder.w_ih_list[k].set_data(Tensor(w[f"lstm.weight_ih_l{k}"]))
            self.encoder.w_hh_list[k].set_data(Tensor(w[f"lstm.weight_hh_l{k}"]))
            self.encoder.b_ih_list[k].set_data(Tensor(w[f"lstm.bias_ih_l{k}"]))
            self.encoder.b_hh_list[k].set_data(Tensor(w[f"lstm.bias_hh_l{k}"]))
        self.decoder = nn.Dense(hidden, w["fc.weight"].shape[0], weight_init=Tensor(w["fc.weight"]),
                                bias_init=Tensor(w["fc.bias"]))

    def construct(self, ids, last):
        output, _ = self.encoder(self.embedding(ids))
        rows = ops.arange(ids.shape[0], dtype=ms.int32)
        return self.decoder(ops.gather_nd(output, ops.stack((rows, last), 1))).astype(ms.float32)


class WithLoss(nn.Cell):
    """nn.WithLossCell for a network of two inputs (ids, last)."""

    def __init__(self, network: nn.Cell):
        super().__init__(auto_prefix=False)
        self.network = network
        self.loss = nn.CrossEntropyLoss()

    def construct(self, ids, last, label):
        return self.loss(self.network(ids, last), label)


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str):
        self.corpus = Corpus(data, hp, spec, seed)
        self.batch, self.seed = int(hp["batch"]), seed
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        w = init_weights(seed, len(self.corpus.vocab), hp["embedding"], hp["hidden"], hp["layers"])
        self.net = SentimentNet(w, hp["layers"])
        opt = nn.Adam(self.net.trainable_params(), learning_rate=hp["lr"], beta1=hp["adam_beta1"],
                      beta2=hp["adam_beta2"], eps=hp["adam_eps"])
        # build_train_network's WithLossCell takes one data input; the network takes two (ids, last), so AMP is
        # ms.amp.auto_mixed_precision on the network (as the GRU reference does) inside the same TrainOneStepCell.
        network = self.net if amp == "off" else ms.amp.auto_mixed_precision(self.net, amp)
        self.train_net = nn.TrainOneStepCell(WithLoss(network), opt)
        self.train_net.set_train()

    def train_epoch(self, epoch: int) -> float:
        losses = [self.train_net(*(Tensor(np.asarray(a).astype(np.int32)) for a in batch))
                  for batch in self.corpus.train_batches(self.batch, self.seed, epoch)]
        return float(np.mean([loss.asnumpy() for loss in losses]))  # asnumpy waits for the device


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp)
