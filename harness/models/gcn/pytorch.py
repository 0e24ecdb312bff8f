"""GCN in PyTorch (eager)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models._pytorch import compiled, mixed_precision, optimizer_options
from harness.models.gcn import accuracy, init_weights


class GraphConvolution(nn.Module):
    """adj @ (x @ W), no bias (as the reference implementation)."""

    def __init__(self, weight: np.ndarray):
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(weight.copy()))

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        support = x @ self.weight  # in the AMP type under autocast
        # The sparse matmul runs in fp32 (an fp32 island, as MindSpore's side does): with autocast left on
        # around it, its backward mixes bf16 and fp32 and fails on CPU.
        with torch.autocast(adj.device.type, enabled=False):
            return torch.sparse.mm(adj, support.float())


class GCN(nn.Module):
    def __init__(self, weights: dict, dropout: float):
        super().__init__()
        self.gc0 = GraphConvolution(weights["w0"])
        self.gc1 = GraphConvolution(weights["w1"])
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, self.training)
        h = F.relu(self.gc0(x, adj))
        h = F.dropout(h, self.dropout, self.training)
        return self.gc1(h, adj)


class Workload:
    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        dev = device_of(ctx)
        self.samples_per_epoch = data["num_nodes"]
        # Full-batch on one graph: features, adjacency and labels go to the device once, here, so an epoch copies
        # nothing and needs no host pipeline (harness.models._pytorch.device_batches) running ahead.
        self.x = torch.from_numpy(data["features"]).to(dev)
        n = data["num_nodes"]
        self.adj = torch.sparse_coo_tensor(torch.from_numpy(data["adj_indices"].T.copy()),
                                           torch.from_numpy(data["adj_values"]), (n, n)).coalesce().to(dev)
        self.labels_np = data["labels"]
        self.labels = torch.from_numpy(data["labels"]).to(dev)
        self.train_idx = torch.from_numpy(data["train_idx"]).to(dev)
        self.idx_np = {s: data[f"{s}_idx"] for s in ("train", "val", "test")}
        weights = init_weights(ctx.seed, data["features"].shape[1], hp["hidden"], data["num_classes"])
        self.net = GCN(weights, hp["dropout"]).to(dev)
        self.weight_decay = hp["weight_decay"]
        self.ctx = ctx
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp["lr"], betas=(hp["adam_beta1"], hp["adam_beta2"]),
                                    eps=hp["adam_eps"], weight_decay=0.0, **optimizer_options(ctx, "Adam"))
        # AMP (autocast + GradScaler, or apex O2 on Ascend) sees the bare model, before torch.compile.
        self.net, self.opt, self.amp = mixed_precision(ctx, self.net, self.opt)
        self.run_net = compiled(ctx, self.net)

    def _loss(self, logits: torch.Tensor) -> torch.Tensor:
        ce = F.cross_entropy(logits[self.train_idx], self.labels[self.train_idx])
        return ce + self.weight_decay * 0.5 * (self.net.gc0.weight ** 2).sum()

    def train_epoch(self) -> float:
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        with self.amp.autocast():
            loss = self._loss(self.run_net(self.x, self.adj).float())
        self.amp.backward(loss)
        self.amp.step()
        return loss.item()

    def probe_forward(self) -> np.ndarray:
        """Eval-mode output on the whole graph (the model's probe batch)."""
        self.net.eval()
        with torch.no_grad():
            return self.run_net(self.x, self.adj).float().cpu().numpy()

    def probe_step(self) -> float:
        return self.train_epoch()  # full-batch: one step is one epoch

    def probe_loss(self) -> float:
        self.net.eval()
        with torch.no_grad():
            return self._loss(self.run_net(self.x, self.adj)).item()

    def evaluate(self, split: str) -> float:
        idx = self.idx_np[split]
        return accuracy(self.probe_forward()[idx], self.labels_np[idx])

    def state_arrays(self) -> list:
        return [p.detach().float().cpu().numpy() for p in self.net.parameters()]


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)
