"""The sweep's operators in PyTorch (eager, or torch.compile'd in compile mode)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.frameworks.pytorch import device, synchronize
from harness.models._pytorch import compiled
from harness.scenarios.operator.ops import BN_EPS, BN_MOMENTUM_PT

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def build(op: str, shape: dict, dtype: str, direction: str, ctx, arrays: dict):
    dev = device(ctx)
    dt = DTYPES[dtype]
    train = direction == "fwd+bwd"

    leaves = []  # what fwd+bwd differentiates with respect to: the input and the weights

    def t(name, grad=False):
        tensor = torch.from_numpy(arrays[name]).to(dev, dt).requires_grad_(grad and train)
        if grad and train:
            leaves.append(tensor)
        return tensor

    x = t("x", grad=True)
    g = t("grad")
    if op == "conv2d":
        w, b = t("weight", True), t("bias", True)

        def fn(x):
            return F.conv2d(x, w, b, stride=1, padding=1)
    elif op == "linear":
        w, b = t("weight", True), t("bias", True)

        def fn(x):
            return F.linear(x, w, b)
    else:
        gamma, beta = t("gamma", True), t("beta", True)
        mean = torch.zeros(shape["channels"], device=dev, dtype=dt)
        var = torch.ones(shape["channels"], device=dev, dtype=dt)

        def fn(x):
            return F.batch_norm(x, mean, var, gamma, beta, training=True, momentum=BN_MOMENTUM_PT, eps=BN_EPS)

    fn = compiled(ctx, fn)
    if train:
        def run():  # fresh gradients each time, like MindSpore's GradOperation (no accumulation into .grad)
            return torch.autograd.grad(fn(x), leaves, g)
    else:
        def run():
            with torch.no_grad():
                return fn(x)

    return run, lambda: synchronize(ctx)
