"""Forward and gradient passes in MindSpore (GRAPH: both compiled, the gradient with ms.jit; PYNATIVE)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops


def build(ctx, model, workload, arrays):
    net = workload.net  # the fp32 network (contracts.Workload)
    loss_cell = model.pass_loss(net)
    tensors = [Tensor(a.astype(np.int32)) if a.dtype.kind in "iu" else Tensor(a) for a in arrays]
    inputs = tensors[:-1]
    grad_fn = ms.value_and_grad(loss_cell, None, net.trainable_params())
    grad_step = ms.jit(grad_fn) if ctx.cell.mode == "graph" else grad_fn
    last = []

    def forward():
        net.set_train(False)
        last[:] = [net(*inputs)]

    def gradient():
        net.set_train(True)
        loss, grads = grad_step(*tensors)
        last[:] = [grads[0]]  # the first layer's gradient: the last one the backward pass computes

    def sync():
        ops.reshape(last[0], (-1,))[0:1].asnumpy()  # reading a value back waits for the queued work (CPU)
        if ctx.platform != "cpu":
            ms.runtime.synchronize()

    return forward, gradient, sync
