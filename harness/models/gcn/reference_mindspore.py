"""GCN reference loop in MindSpore, written as its model zoo writes GCN (models/official/gnn/GCN): GraphConvolution
and GCN nn.Cells, a loss Cell (softmax cross-entropy on the training nodes plus L2 on the first layer's weight,
weight_decay * sum(W0^2) / 2, as the zoo and Kipf's original), nn.Adam and nn.TrainOneStepCell, called once per
epoch. The adjacency is sparse (ops.SparseTensorDenseMatmul), as in the harness and in PyTorch's pygcn, so both
sides do the same work; the zoo's dense adjacency would be a different computation.

AMP: ms.amp.auto_mixed_precision on the GCN at the given level (no loss scale on CPU); the sparse matmul and the
loss stay fp32. Runs in GRAPH or PYNATIVE, whichever the caller set.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models.gcn import init_weights


class GraphConvolution(nn.Cell):
    def __init__(self, weight: np.ndarray, name: str, num_nodes: int):
        super().__init__()
        self.weight = ms.Parameter(Tensor(weight), name=name)
        self.matmul = ops.MatMul()
        self.spmm = ops.SparseTensorDenseMatmul()
        self.shape = (num_nodes, num_nodes)

    def construct(self, x, adj_indices, adj_values):
        support = self.matmul(x, self.weight.astype(x.dtype))
        # AMP casts the network's inputs, adj_values too: the sparse matmul runs in fp32 (an fp32 island).
        return self.spmm(adj_indices, adj_values.astype(ms.float32), self.shape, support.astype(ms.float32))


class GCN(nn.Cell):
    def __init__(self, weights: dict, dropout: float, num_nodes: int):
        super().__init__()
        self.layer0 = GraphConvolution(weights["w0"], "w0", num_nodes)
        self.layer1 = GraphConvolution(weights["w1"], "w1", num_nodes)
        self.dropout0 = nn.Dropout(p=dropout)
        self.dropout1 = nn.Dropout(p=dropout)
        self.relu = nn.ReLU()

    def construct(self, x, adj_indices, adj_values):
        h = self.relu(self.layer0(self.dropout0(x), adj_indices, adj_values))
        return self.layer1(self.dropout1(h), adj_indices, adj_values)


class LossCell(nn.Cell):
    """Softmax cross-entropy over the training nodes + weight_decay * sum(W0^2) / 2."""

    def __init__(self, network: nn.Cell, weight0: ms.Parameter, weight_decay: float):
        super().__init__()
        self.network = network
        self.weight0 = weight0
        self.weight_decay = weight_decay
        self.loss_fn = nn.CrossEntropyLoss()

    def construct(self, x, adj_indices, adj_values, labels, train_idx):
        logits = self.network(x, adj_indices, adj_values).astype(ms.float32)
        loss = self.loss_fn(ops.gather(logits, train_idx, 0), ops.gather(labels, train_idx, 0))
        return loss + self.weight_decay * 0.5 * ops.reduce_sum(ops.square(self.weight0))


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str):
        n = data["num_nodes"]
        self.samples_per_epoch = n
        weights = init_weights(seed, data["features"].shape[1], hp["hidden"], data["num_classes"])
        self.net = GCN(weights, hp["dropout"], n)
        network = self.net if amp == "off" else ms.amp.auto_mixed_precision(self.net, amp)
        loss = LossCell(network, self.net.layer0.weight, hp["weight_decay"])
        opt = nn.Adam(self.net.trainable_params(), learning_rate=hp["lr"], beta1=hp["adam_beta1"],
                      beta2=hp["adam_beta2"], eps=hp["adam_eps"])
        self.train_net = nn.TrainOneStepCell(loss, opt)
        self.train_net.set_train()
        self.inputs = (Tensor(data["features"]), Tensor(data["adj_indices"]), Tensor(data["adj_values"]),
                       Tensor(data["labels"].astype(np.int32)), Tensor(data["train_idx"].astype(np.int32)))

    def train_epoch(self, epoch: int) -> float:
        """Full-batch: one step of the TrainOneStepCell on the whole graph, the same for every epoch number."""
        return float(self.train_net(*self.inputs).asnumpy())


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp)
