"""Forward and gradient passes in PyTorch (eager, or torch.compile'd in compile mode)."""

from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

from harness.frameworks.pytorch import device, synchronize
from harness.models._pytorch import compiled


def _loss(model: str):
    if model == "gru":
        return importlib.import_module("harness.models.gru.pytorch").masked_ce
    return F.cross_entropy


def build(ctx, model: str, workload, arrays):
    dev = device(ctx)
    net = workload.net
    fn = compiled(ctx, net)
    tensors = [torch.from_numpy(a).to(dev) for a in arrays]
    if model != "resnet50" and model != "googlenet":
        tensors = [t.long() for t in tensors]
    else:
        tensors[-1] = tensors[-1].long()
    *inputs, target = tensors
    loss_fn = _loss(model)
    params = [p for p in net.parameters() if p.requires_grad]

    def forward():
        net.eval()
        with torch.no_grad():
            return fn(*inputs)

    def gradient():
        net.train()
        return torch.autograd.grad(loss_fn(fn(*inputs), target), params)

    return forward, gradient, lambda: synchronize(ctx)
