"""GCN in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models._mindspore import amp_network, make_train_step
from harness.models.gcn import accuracy, init_weights


class GraphConvolution(nn.Cell):
    """adj @ (x @ W), no bias (as the reference implementation)."""

    def __init__(self, weight: np.ndarray, name: str, num_nodes: int):
        super().__init__()
        self.weight = ms.Parameter(Tensor(weight), name=name)
        # ops.SparseTensorDenseMatmul trains on CPU, GPU and Ascend; the COO/CSR Tensor matmuls do not on CPU.
        self.spmm = ops.SparseTensorDenseMatmul()
        # The MatMul primitive, as MindSpore's model zoo GCN uses: the functional ops.matmul (broadcasting) made the
        # whole training step run at 0.64 of the reference loop's (benchmarks/reference_gap.py, GRAPH, fp32).
        self.matmul = ops.MatMul()
        self.shape = (num_nodes, num_nodes)

    def construct(self, x, adj_indices, adj_values):
        # Under AMP (O2/O3) x arrives in fp16: the dense matmul runs in x's type, the sparse one in fp32
        # (an fp32 island, as on the PyTorch side), since adj_values stay fp32.
        support = self.matmul(x, self.weight.astype(x.dtype))
        return self.spmm(adj_indices, adj_values.astype(ms.float32), self.shape, support.astype(ms.float32))


class GCN(nn.Cell):
    def __init__(self, weights: dict, dropout: float, num_nodes: int):
        super().__init__()
        self.gc0 = GraphConvolution(weights["w0"], "w0", num_nodes)
        self.gc1 = GraphConvolution(weights["w1"], "w1", num_nodes)
        self.drop0 = nn.Dropout(p=dropout)
        self.drop1 = nn.Dropout(p=dropout)

    def construct(self, x, adj_indices, adj_values):
        h = ops.relu(self.gc0(self.drop0(x), adj_indices, adj_values))
        return self.gc1(self.drop1(h), adj_indices, adj_values)


class LossCell(nn.Cell):
    def __init__(self, net: nn.Cell, decayed: ms.Parameter, weight_decay: float):
        super().__init__()
        self.net = net          # the GCN, possibly wrapped for AMP
        self.decayed = decayed  # the first layer's weight: L2 on it only, as the reference
        self.weight_decay = weight_decay

    def construct(self, x, adj_indices, adj_values, labels, train_idx):
        logits = self.net(x, adj_indices, adj_values).astype(ms.float32)
        ce = ops.cross_entropy(ops.gather(logits, train_idx, 0), ops.gather(labels, train_idx, 0))
        return ce + self.weight_decay * 0.5 * (self.decayed ** 2).sum()


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
        self.loss_cell = LossCell(amp_network(ctx, self.net), self.net.gc0.weight, hp["weight_decay"])
        self.opt = nn.Adam(self.net.trainable_params(), learning_rate=hp["lr"], beta1=hp["adam_beta1"],
                           beta2=hp["adam_beta2"], eps=hp["adam_eps"], weight_decay=0.0)
        self.step = make_train_step(ctx, self.loss_cell, self.opt)

    def train_epoch(self) -> float:
        if not self.net.training:  # only after an evaluation: set_train on every full-batch epoch costs time
            self.net.set_train(True)
        return float(self.step(*self.inputs, *self.train_args).asnumpy())  # asnumpy waits for the device

    def probe_forward(self) -> np.ndarray:
        """Eval-mode output on the whole graph (the model's probe batch)."""
        self.net.set_train(False)
        return self.net(*self.inputs).asnumpy()

    def probe_step(self) -> float:
        return self.train_epoch()  # full-batch: one step is one epoch

    def probe_loss(self) -> float:
        self.net.set_train(False)
        return float(self.loss_cell(*self.inputs, *self.train_args).asnumpy())

    def evaluate(self, split: str) -> float:
        idx = self.idx_np[split]
        return accuracy(self.probe_forward()[idx], self.labels_np[idx])

    def state_arrays(self) -> list:
        return [p.asnumpy() for p in self.net.trainable_params()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)
