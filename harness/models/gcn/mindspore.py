"""GCN in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models.gcn import accuracy, init_weights


class GCN(nn.Cell):
    def __init__(self, weights: dict, dropout: float, num_nodes: int):
        super().__init__()
        self.w0 = ms.Parameter(Tensor(weights["w0"]), name="w0")
        self.w1 = ms.Parameter(Tensor(weights["w1"]), name="w1")
        self.drop0 = nn.Dropout(p=dropout)
        self.drop1 = nn.Dropout(p=dropout)
        # ops.SparseTensorDenseMatmul trains on CPU, GPU and Ascend; the COO/CSR Tensor matmuls do not on CPU.
        self.spmm = ops.SparseTensorDenseMatmul()
        self.shape = (num_nodes, num_nodes)

    def construct(self, x, adj_indices, adj_values):
        x = self.drop0(x)
        h = ops.relu(self.spmm(adj_indices, adj_values, self.shape, ops.matmul(x, self.w0)))
        h = self.drop1(h)
        return self.spmm(adj_indices, adj_values, self.shape, ops.matmul(h, self.w1))


class LossCell(nn.Cell):
    def __init__(self, net: GCN, weight_decay: float):
        super().__init__()
        self.net = net
        self.weight_decay = weight_decay

    def construct(self, x, adj_indices, adj_values, labels, train_idx):
        logits = self.net(x, adj_indices, adj_values)
        ce = ops.cross_entropy(ops.gather(logits, train_idx, 0), ops.gather(labels, train_idx, 0))
        return ce + self.weight_decay * 0.5 * (self.net.w0 ** 2).sum()


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.samples_per_epoch = data["num_nodes"]
        self.inputs = (Tensor(data["features"]), Tensor(data["adj_indices"]), Tensor(data["adj_values"]))
        self.labels_np = data["labels"]
        self.train_args = (Tensor(data["labels"].astype(np.int32)), Tensor(data["train_idx"].astype(np.int32)))
        self.idx_np = {s: data[f"{s}_idx"] for s in ("train", "val", "test")}
        weights = init_weights(ctx.seed, data["features"].shape[1], hp["hidden"], data["num_classes"])
        self.net = GCN(weights, hp["dropout"], data["num_nodes"])
        self.loss_cell = LossCell(self.net, hp["weight_decay"])
        self.opt = nn.Adam(self.net.trainable_params(), learning_rate=hp["lr"], beta1=hp["adam_beta1"],
                           beta2=hp["adam_beta2"], eps=hp["adam_eps"], weight_decay=0.0)
        grad_fn = ms.value_and_grad(self.loss_cell, None, self.opt.parameters)

        def step(*args):
            loss, grads = grad_fn(*args)
            # depend: the loss is ready only once the update is done, so reading it back (train_epoch)
            # waits for the whole step, also in PYNATIVE mode where ops are dispatched asynchronously.
            return ops.depend(loss, self.opt(grads))

        # In GRAPH mode the whole step (forward, backward, update) compiles to one graph.
        self.step = ms.jit(step) if ctx.cell.mode == "graph" else step

    def train_epoch(self) -> float:
        self.net.set_train(True)
        return float(self.step(*self.inputs, *self.train_args).asnumpy())  # asnumpy waits for the device

    def logits(self) -> np.ndarray:
        self.net.set_train(False)
        return self.net(*self.inputs).asnumpy()

    def evaluate(self, split: str) -> float:
        idx = self.idx_np[split]
        return accuracy(self.logits()[idx], self.labels_np[idx])


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)

