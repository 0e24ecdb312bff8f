"""The sweep's operators in MindSpore: the iteration is an nn.Cell, which GRAPH mode compiles whole and PYNATIVE
runs op by op."""

from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, nn, ops

from harness.errors import Unsupported
from harness.scenarios.operator.ops import BN_EPS, BN_MOMENTUM_PT

DTYPES = {"fp32": ms.float32, "fp16": ms.float16, "bf16": ms.bfloat16}


def _layer(op: str, shape: dict, arrays: dict, dtype) -> nn.Cell:
    if op == "conv2d":
        cell = nn.Conv2d(shape["in_channels"], shape["out_channels"], 3, stride=1, pad_mode="pad", padding=1,
                         has_bias=True, weight_init=Tensor(arrays["weight"]), bias_init=Tensor(arrays["bias"]))
    elif op == "linear":
        cell = nn.Dense(shape["in_features"], shape["out_features"], has_bias=True,
                        weight_init=Tensor(arrays["weight"]), bias_init=Tensor(arrays["bias"]))
    else:
        cell = nn.BatchNorm2d(shape["channels"], eps=BN_EPS, momentum=1 - BN_MOMENTUM_PT, affine=True,
                              gamma_init=Tensor(arrays["gamma"]), beta_init=Tensor(arrays["beta"]))
    return cell.to_float(dtype)


class _Forward(nn.Cell):
    """The forward alone (g unused). An nn.Cell, as MindSpore's own training cells are, so GRAPH mode compiles it
    whole and runs it on its graph executor."""

    def __init__(self, net: nn.Cell):
        super().__init__(auto_prefix=False)
        self.net = net

    def construct(self, x, g):
        return self.net(x)


class _GradStep(nn.Cell):
    """Forward and backward: the gradients with respect to the input and the weights for the output gradient g,
    built as nn.TrainOneStepCell builds its gradient (GradOperation with a sensitivity), less the update. Measured
    on the 2-core machine (Conv2d fwd+bwd 64->64, GRAPH), the `ms.jit`-compiled function it replaced went through
    PYNATIVE's dispatch queue, whose threads spin (AsyncRQueue::Wait, sched_yield) beside the kernel threads: 41 or
    100 ms an iteration by turns, against 22-49 ms for this cell (docs/methodology/operators.md)."""

    def __init__(self, net: nn.Cell):
        super().__init__(auto_prefix=False)
        self.net = net
        self.weights = ms.ParameterTuple(net.trainable_params())
        self.grad = ops.GradOperation(get_all=True, get_by_list=True, sens_param=True)

    def construct(self, x, g):
        return self.grad(self.net, self.weights)(x, g)


def build(op: str, shape: dict, dtype: str, direction: str, ctx, arrays: dict):
    if dtype == "bf16" and ctx.platform == "cpu":
        # Checked with 2.10: MatMul, Conv2D and BatchNorm have no bf16 CPU kernel ("Unsupported data type").
        raise Unsupported("MindSpore 2.10 has no bf16 CPU kernels for Dense, Conv2d or BatchNorm2d")
    dt = DTYPES[dtype]
    cell = _layer(op, shape, arrays, dt)
    cell.set_train(True)  # BatchNorm normalises with the batch's statistics, as the PyTorch side
    x = Tensor(arrays["x"]).astype(dt)
    g = Tensor(arrays["grad"]).astype(dt)
    if direction == "fwd+bwd":
        step = _GradStep(cell)
        if ctx.cell.mode == "pynative":
            cell.set_grad()  # record the forward for the gradient as it runs (nn.TrainOneStepCell does the same)
    else:
        step = _Forward(cell)
    last = []

    def run():
        last[:] = [step(x, g)]

    def sync():
        # On CPU runtime.synchronize() does nothing: reading one value back waits for the queued work.
        out = last[0]
        first = out[0][0] if isinstance(out, tuple) else out
        ops.reshape(first, (-1,))[0:1].asnumpy()
        if ctx.platform != "cpu":
            ms.runtime.synchronize()

    if ctx.platform == "cpu":
        run()
        sync()   # GRAPH compiles and the runtime starts its threads on the first call: they keep their priority
        _waiting_thread_idle(ctx)
    return run, sync


def _waiting_thread_idle(ctx) -> None:
    """On a process with several cores, the calling thread to SCHED_IDLE (this thread only; Linux scheduling policy is
    per thread). MindSpore computes a CPU kernel on its own threads (ActorThread_0 and KernelThread_0 on the 2-core
    machine), and the thread that launched it waits for them in ThreadPool::ParallelLaunch by calling sched_yield in
    a loop (perf record on the 2-core machine: about a third of all samples were that thread in sched_yield). On a
    host with as many cores as compute threads, that waiting thread takes a core's turn from a computing one, by
    chance more or less in each process. PyTorch has no such thread (its launching thread is one of its OpenMP
    compute threads). As SCHED_IDLE the waiting thread runs only on a core that would otherwise idle, so both
    frameworks compute on every core; what it does between kernels (PYNATIVE's Python dispatch) still runs and is
    timed, on cores its compute threads have left. Measured per process (docs/methodology/operators.md).

    Not on a process confined to one core (harness.scenarios.operator.ops.CPU_CORES): there the launching thread shares
    its core with the compute threads and, idle, waited for them in turns. On one core, PYNATIVE's Dense fwd 512->512
    ran 699-1,563 us with it and 552-569 us without; its Conv2d fwd+bwd 16->64, 35-56 ms and 21-24 ms (4 and 3
    processes)."""
    import os

    if len(os.sched_getaffinity(0)) == 1:
        ctx.settings["launching_thread"] = "default policy (one core: it computes there)"
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        ctx.settings["launching_thread"] = "SCHED_IDLE"
    except (AttributeError, OSError) as e:   # not Linux, or a sandbox that forbids it: timed as it is
        ctx.settings["launching_thread"] = f"default policy ({e})"
