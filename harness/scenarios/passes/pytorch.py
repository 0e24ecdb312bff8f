"""Forward and gradient passes in PyTorch (eager, or torch.compile'd in compile mode)."""

from __future__ import annotations

import torch

from harness.frameworks.pytorch import device, synchronize
from harness.models._pytorch import compiled


def build(ctx, model, workload, arrays):
    dev = device(ctx)
    net = workload.net
    fn = compiled(ctx, net)
    # Integer arrays (token ids, lengths, labels) as int64, the index type PyTorch's embeddings and losses take;
    # float arrays (images) as they are.
    tensors = [t if t.is_floating_point() else t.long() for t in (torch.from_numpy(a).to(dev) for a in arrays)]
    *inputs, target = tensors
    loss = model.pass_loss(fn)
    params = [p for p in net.parameters() if p.requires_grad]

    def forward():
        net.eval()
        with torch.no_grad():
            return fn(*inputs)

    def gradient():
        net.train()
        return torch.autograd.grad(loss(*inputs, target), params)

    return forward, gradient, lambda: synchronize(ctx)
