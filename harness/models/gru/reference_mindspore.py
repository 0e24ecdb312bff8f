"""GRU encoder-decoder reference loop in MindSpore, written as its model zoo writes its GRU seq2seq
(models/official/nlp/GRU): Encoder, Decoder and Seq2Seq nn.Cells (nn.Embedding + nn.GRU, nn.Dense over the
decoder's outputs, teacher forcing), a loss Cell (cross-entropy over the non-<pad> target tokens), nn.Adam, and a
subclass of nn.TrainOneStepCell that clips the gradients in construct before the update, as the zoo's
GRUTrainOneStepCell does. The clip is global-norm with torch's formula, coef = min(1, clip / (norm + 1e-6)), so
it matches the harness and PyTorch (the zoo's own clip_grad clips each tensor on its own). Per-step Tensors, one
call of the train cell per batch; GRAPH or PYNATIVE, whichever the caller set.

Same as the harness cell: the shared initial weights, the decoder started from the encoder's state at each row's
source <eos>, and the epoch's batches in the harness's order (harness.models.gru.Corpus).

AMP: ms.amp.auto_mixed_precision on the Seq2Seq network at the given level; the loss stays fp32; no loss scale
on CPU.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models.gru import PAD, Corpus, init_weights

_sq_sum = ops.MultitypeFuncGraph("sq_sum")
_scale = ops.MultitypeFuncGraph("scale")


@_sq_sum.register("Tensor")
def _tensor_sq_sum(grad):
    return ops.reduce_sum(ops.square(grad.astype(ms.float32)))


@_scale.register("Tensor", "Tensor")
def _tensor_scale(coef, grad):
    return (grad * coef).astype(grad.dtype)


def _gru(w: dict, prefix: str, emb: int, hidden: int) -> nn.GRU:
    gru = nn.GRU(emb, hidden, num_layers=1, has_bias=True, batch_first=True)
    gru.w_ih_list[0].set_data(Tensor(w[f"{prefix}_w_ih"]))
    gru.w_hh_list[0].set_data(Tensor(w[f"{prefix}_w_hh"]))
    gru.b_ih_list[0].set_data(Tensor(w[f"{prefix}_b_ih"]))
    gru.b_hh_list[0].set_data(Tensor(w[f"{prefix}_b_hh"]))
    return gru


class Encoder(nn.Cell):
    def __init__(self, w: dict, emb: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(w["enc_emb"].shape[0], emb, embedding_table=Tensor(w["enc_emb"]))
        self.gru = _gru(w, "enc", emb, hidden)

    def construct(self, src, last):
        output, _ = self.gru(self.embedding(src))
        rows = ops.arange(src.shape[0], dtype=ms.int32)
        return ops.expand_dims(ops.gather_nd(output, ops.stack((rows, last), 1)), 0)  # (1, B, H) at each <eos>


class Decoder(nn.Cell):
    def __init__(self, w: dict, emb: int, hidden: int):
        super().__init__()
        vocab = w["dec_emb"].shape[0]
        self.embedding = nn.Embedding(vocab, emb, embedding_table=Tensor(w["dec_emb"]))
        self.gru = _gru(w, "dec", emb, hidden)
        self.dense = nn.Dense(hidden, vocab, weight_init=Tensor(w["out_w"]), bias_init=Tensor(w["out_b"]))

    def construct(self, tgt_in, hidden):
        embedded = self.embedding(tgt_in)
        output, hidden = self.gru(embedded, hidden.astype(embedded.dtype))
        return self.dense(output), hidden


class Seq2Seq(nn.Cell):
    def __init__(self, w: dict, emb: int, hidden: int):
        super().__init__()
        self.encoder = Encoder(w, emb, hidden)
        self.decoder = Decoder(w, emb, hidden)

    def construct(self, src, last, tgt_in):
        logits, _ = self.decoder(tgt_in, self.encoder(src, last))
        return logits


class Seq2SeqWithLoss(nn.Cell):
    """Mean cross-entropy over the non-<pad> target tokens, in fp32."""

    def __init__(self, network: nn.Cell):
        super().__init__()
        self.network = network
        self.loss = nn.CrossEntropyLoss(ignore_index=PAD)

    def construct(self, src, last, tgt_in, tgt_out):
        logits = self.network(src, last, tgt_in).astype(ms.float32)
        return self.loss(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))


class GRUTrainOneStepCell(nn.TrainOneStepCell):
    """nn.TrainOneStepCell with global-norm gradient clipping (torch's formula) before the update."""

    def __init__(self, network: nn.Cell, optimizer: nn.Optimizer, clip_norm: float):
        super().__init__(network, optimizer)
        self.clip_norm = clip_norm
        self.hyper_map = ops.HyperMap()

    def construct(self, *inputs):
        loss = self.network(*inputs)
        sens = ops.fill(loss.dtype, loss.shape, self.sens)
        grads = self.grad(self.network, self.weights)(*inputs, sens)
        grads = self.grad_reducer(grads)
        norm = ops.sqrt(ops.addn(self.hyper_map(_sq_sum, grads)))
        coef = ops.clamp(self.clip_norm / (norm + 1e-6), max=1.0)
        grads = self.hyper_map(ops.partial(_scale, coef), grads)
        return ops.depend(loss, self.optimizer(grads))


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str):
        self.corpus = Corpus(data, hp, spec)
        self.samples_per_epoch = self.corpus.n_train
        self.batch_size, self.seed = hp["batch"], seed
        w = init_weights(seed, len(self.corpus.src_vocab), len(self.corpus.tgt_vocab), hp["embedding"], hp["hidden"])
        self.net = Seq2Seq(w, hp["embedding"], hp["hidden"])
        network = self.net if amp == "off" else ms.amp.auto_mixed_precision(self.net, amp)
        opt = nn.Adam(self.net.trainable_params(), learning_rate=hp["lr"], beta1=hp["adam_beta1"],
                      beta2=hp["adam_beta2"], eps=hp["adam_eps"])
        self.train_net = GRUTrainOneStepCell(Seq2SeqWithLoss(network), opt, float(hp["clip_norm"]))
        self.train_net.set_train()

    def train_epoch(self, epoch: int) -> float:
        losses = []
        for idx in self.corpus.epoch_batches(self.batch_size, self.seed, epoch):
            batch = self.corpus.batch("train", idx, self.batch_size)
            losses.append(self.train_net(*(Tensor(a.astype(np.int32)) for a in batch)))
        return float(np.mean([loss.asnumpy() for loss in losses]))  # asnumpy waits for the device


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp)
