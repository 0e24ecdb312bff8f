"""GCN in PyTorch (eager)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models.gcn import accuracy, init_weights


class GCN(nn.Module):
    def __init__(self, weights: dict, dropout: float):
        super().__init__()
        self.w0 = nn.Parameter(torch.from_numpy(weights["w0"].copy()))
        self.w1 = nn.Parameter(torch.from_numpy(weights["w1"].copy()))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, self.training)
        h = F.relu(torch.sparse.mm(adj, x @ self.w0))
        h = F.dropout(h, self.dropout, self.training)
        return torch.sparse.mm(adj, h @ self.w1)


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        dev = device_of(ctx)
        self.samples_per_epoch = data["num_nodes"]
        self.x = torch.from_numpy(data["features"]).to(dev)
        n = data["num_nodes"]
        self.adj = torch.sparse_coo_tensor(torch.from_numpy(data["adj_indices"].T.copy()),
                                           torch.from_numpy(data["adj_values"]), (n, n)).coalesce().to(dev)
        self.labels_np = data["labels"]
        self.labels = torch.from_numpy(data["labels"]).to(dev)
        self.idx = {s: torch.from_numpy(data[f"{s}_idx"]).to(dev) for s in ("train", "val", "test")}
        self.idx_np = {s: data[f"{s}_idx"] for s in ("train", "val", "test")}
        weights = init_weights(ctx.seed, data["features"].shape[1], hp["hidden"], data["num_classes"])
        self.net = GCN(weights, hp["dropout"]).to(dev)
        self.weight_decay = hp["weight_decay"]
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp["lr"], betas=(hp["adam_beta1"], hp["adam_beta2"]),
                                    eps=hp["adam_eps"], weight_decay=0.0)

    def loss(self, logits: torch.Tensor) -> torch.Tensor:
        train = self.idx["train"]
        return F.cross_entropy(logits[train], self.labels[train]) + self.weight_decay * 0.5 * (self.net.w0 ** 2).sum()

    def train_epoch(self) -> float:
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(self.net(self.x, self.adj))
        loss.backward()
        self.opt.step()
        return loss.item()

    def logits(self) -> np.ndarray:  # noqa: F821
        self.net.eval()
        with torch.no_grad():
            return self.net(self.x, self.adj).float().cpu().numpy()

    def evaluate(self, split: str) -> float:
        idx = self.idx_np[split]
        return accuracy(self.logits()[idx], self.labels_np[idx])


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)
