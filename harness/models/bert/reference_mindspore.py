"""BERT masked-LM pre-training reference loop in MindSpore, written with MindSpore's own transformer blocks:
nn.Embedding, nn.TransformerEncoder of nn.TransformerEncoderLayer (post-LayerNorm, GELU, batch first, padding keys
masked with src_key_padding_mask), an MLM head decoding with the word embedding table (tied), a loss Cell (weighted
per-token nn.CrossEntropyLoss, as the model zoo's BertPretrainingLoss weights its masked positions),
mindspore.experimental.optim.AdamW with its LambdaLR, nn.TrainOneStepCell, one call of the train cell per batch with
per-step Tensors; GRAPH or PYNATIVE, whichever the caller set. (The model zoo's BERT uses nn.AdamWeightDecay, which has
no bias correction: it would not train like torch.optim.AdamW.)

Same as the harness cell: the shared initial weights (harness.models.bert.init_weights, loaded into the blocks' own
layout: query, key and value packed into in_proj_weight), the sequences, masks and batches in the harness's order
(harness.models.bert.Corpus), the hyperparameters and the schedule (harness.models.bert.lr_factor).

AMP: ms.amp.auto_mixed_precision on the network at the given level (no loss scale on CPU); the loss in fp32.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.experimental import optim

from harness.models.bert import Corpus, init_weights, lr_factor, steps_total


def _layout(w: dict, layers: int) -> dict:
    """The shared weights under this network's parameter names."""
    out = {"word.embedding_table": w["embeddings.word.weight"],
           "position.embedding_table": w["embeddings.position.weight"],
           "token_type.embedding_table": w["embeddings.token_type.weight"], "norm.gamma": w["embeddings.norm.weight"],
           "norm.beta": w["embeddings.norm.bias"], "dense.weight": w["head.dense.weight"],
           "dense.bias": w["head.dense.bias"], "head_norm.gamma": w["head.norm.weight"],
           "head_norm.beta": w["head.norm.bias"], "decoder_bias": w["head.bias"]}
    for i in range(layers):
        src, dst = f"layers.{i}", f"encoder.layers.{i}"
        for kind, ms_ln in (("weight", "gamma"), ("bias", "beta")):
            out[f"{dst}.self_attn.in_proj_{kind}"] = np.concatenate(
                [w[f"{src}.attention.{n}.{kind}"] for n in ("query", "key", "value")])
            for a, b in (("self_attn.out_proj", "attention.out"), ("dense1", "up"), ("dense2", "down")):
                out[f"{dst}.{a}.{kind}"] = w[f"{src}.{b}.{kind}"]
            out[f"{dst}.norm1.{ms_ln}"] = w[f"{src}.attention_norm.{kind}"]
            out[f"{dst}.norm2.{ms_ln}"] = w[f"{src}.output_norm.{kind}"]
    return out


class BertForMaskedLM(nn.Cell):
    def __init__(self, w: dict, hp: dict):
        super().__init__()
        vocab, h = w["embeddings.word.weight"].shape
        self.word = nn.Embedding(vocab, h)
        self.position = nn.Embedding(int(hp["max_len"]), h)
        self.token_type = nn.Embedding(2, h)
        self.norm = nn.LayerNorm((h,), epsilon=1e-12)
        self.dropout = nn.Dropout(p=hp["dropout"])
        layer = nn.TransformerEncoderLayer(h, hp["heads"], hp["intermediate"], hp["dropout"], activation="gelu",
                                           layer_norm_eps=1e-12, batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, hp["layers"])
        self.dense = nn.Dense(h, h)
        self.head_norm = nn.LayerNorm((h,), epsilon=1e-12)
        self.decoder_bias = Parameter(Tensor(np.zeros(vocab, np.float32)), name="decoder_bias")
        state = _layout(w, hp["layers"])
        params = dict(self.parameters_and_names())
        if set(params) != set(state):
            raise RuntimeError(f"weight names differ: {sorted(set(params) ^ set(state))[:6]}")
        for name, p in params.items():
            p.set_data(Tensor(state[name]))

    def construct(self, ids, keys, positions):
        pos = ops.arange(ids.shape[1], dtype=ms.int32)
        x = self.dropout(self.norm(self.word(ids) + self.position(pos) + self.token_type(ops.zeros_like(ids))))
        x = self.encoder(x, src_key_padding_mask=keys == 0)
        y = self.head_norm(ops.gelu(self.dense(ops.gather(x.reshape(-1, x.shape[-1]), positions, 0))))
        return ops.matmul(y, self.word.embedding_table.astype(y.dtype).T) + self.decoder_bias.astype(y.dtype)


class MaskedLMLoss(nn.Cell):
    def __init__(self, network: nn.Cell):
        super().__init__(auto_prefix=False)
        self.network = network
        self.loss = nn.CrossEntropyLoss(reduction="none")

    def construct(self, ids, keys, positions, labels, weights):
        per_token = self.loss(self.network(ids, keys, positions).astype(ms.float32), labels)
        return (per_token * weights).sum() / (weights.sum() + 1e-5)


class Reference:
    def __init__(self, data: dict, hp: dict, spec, seed: int, amp: str):
        self.corpus = Corpus(data, hp, spec, seed)
        self.batch = int(hp["batch"])
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        self.net = BertForMaskedLM(init_weights(seed, self.corpus.vocab_size, hp), hp)
        no_decay = ("bias", "gamma", "beta")  # biases and LayerNorms
        params = self.net.trainable_params()
        groups = [{"params": [p for p in params if not any(k in p.name for k in no_decay)],
                   "weight_decay": hp["weight_decay"]},
                  {"params": [p for p in params if any(k in p.name for k in no_decay)], "weight_decay": 0.0}]
        opt = optim.AdamW(groups, lr=hp["lr"], betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=1e-6)
        total = steps_total(self.corpus, hp, spec)
        self.scheduler = optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, hp["warmup_steps"], total))
        network = self.net if amp == "off" else ms.amp.auto_mixed_precision(self.net, amp)
        self.train_net = nn.TrainOneStepCell(MaskedLMLoss(network), opt)
        self.train_net.set_train()

    def train_epoch(self, epoch: int) -> float:
        losses = []
        for batch in self.corpus.train_batches(self.batch, epoch):
            types = (np.int32, np.float32, np.int32, np.int32, np.float32)
            losses.append(self.train_net(*(Tensor(a.astype(t)) for a, t in zip(batch, types, strict=True))))
            self.scheduler.step()
        return float(np.mean([loss.asnumpy() for loss in losses]))  # asnumpy waits for the device


def build(data: dict, hp: dict, spec, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp)
