"""GCN reference loop in PyTorch, written as Kipf's own PyTorch port (pygcn) writes it: a GraphConvolution
module (support = input @ W, output = spmm(adj, support)), log_softmax + nll_loss on the training nodes, Adam,
and the standard loop. As the harness cell: no bias, L2 on the first layer only added to the loss
(weight_decay * sum(W0^2) / 2, as Kipf's TensorFlow original), the shared initial weights.

AMP: torch.autocast("cpu", bfloat16) around the forward pass and loss; the sparse matmul runs outside autocast
(its backward fails on CPU with bf16 and fp32 mixed), as in the harness. No GradScaler on CPU (bf16 needs none).
Given a CUDA device: the graph on the device once, the fused Adam, torch.autocast("cuda", float16) with a GradScaler.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.models._reference_pytorch import amp_tools
from harness.models.gcn import init_weights


class GraphConvolution(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(weight.copy()))

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        with torch.autocast(adj.device.type, enabled=False):
            return torch.spmm(adj, support.float())


class GCN(nn.Module):
    def __init__(self, weights: dict, dropout: float):
        super().__init__()
        self.gc1 = GraphConvolution(weights["w0"])
        self.gc2 = GraphConvolution(weights["w1"])
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu"):
        n = data["num_nodes"]
        self.device = torch.device(device)
        self.samples_per_epoch = n
        self.features = torch.from_numpy(data["features"])
        self.adj = torch.sparse_coo_tensor(torch.from_numpy(data["adj_indices"].T.copy()),
                                           torch.from_numpy(data["adj_values"]), (n, n)).coalesce()
        self.features, self.adj = self.features.to(self.device), self.adj.to(self.device)
        self.labels = torch.from_numpy(data["labels"]).long().to(self.device)
        self.idx_train = torch.from_numpy(data["train_idx"]).long().to(self.device)
        weights = init_weights(seed, data["features"].shape[1], hp["hidden"], data["num_classes"])
        self.model = GCN(weights, hp["dropout"]).to(self.device)
        self.weight_decay = hp["weight_decay"]
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=hp["lr"],
                                          betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=hp["adam_eps"],
                                          **({"fused": True} if self.device.type == "cuda" else {}))
        self.amp = amp != "off"
        self.autocast, self.scaler = amp_tools(self.device, self.amp)

    def train_epoch(self, epoch: int) -> float:
        """Full-batch: one optimiser step on the whole graph, the same for every epoch number."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast:
            output = self.model(self.features, self.adj)
            loss_train = F.nll_loss(output[self.idx_train], self.labels[self.idx_train])
            loss_train = loss_train + self.weight_decay * 0.5 * self.model.gc1.weight.pow(2).sum()
        self.scaler.scale(loss_train).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss_train.item()


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp, device)
