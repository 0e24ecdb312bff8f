"""Forward time and gradient time per batch (a `kind: passes` cell; S4, Bahrampour et al. 2015): a matrix model at a
fixed batch (S4: 16), the forward pass (eval mode, no gradients) and the gradient computation (train mode, forward +
backward, no update), each timed as the operator cells are (warm-up, blocks, median and IQR over blocks), at the
cell's number of CPU threads.

Threads are applied to both frameworks before the model is built and recorded in the result's settings: PyTorch
torch.set_num_threads(n) (intra-op); MindSpore mindspore.device_context.cpu.op_tuning.threads_num(n) (its CPU
kernels' thread pool). `all` is the number of cores this process may run on."""

from __future__ import annotations

from typing import Any

from harness import data as datasets
from harness.errors import Unsupported
from harness.results.eventlog import END, RUN_START, RUN_STOP, START, SUCCESS
from harness.scenarios.operator import ops as operators
from harness.scenarios.passes import common as passes


def run(ctx, backend, events) -> dict[str, Any]:
    cell, spec = ctx.cell, ctx.cell.spec
    if ctx.platform != "cpu" and spec.threads != "all":
        raise Unsupported("the CPU threads axis is measured on CPU hosts only (S4's CPU set-up)")
    batch = int(spec.batch)  # the model's hparams hold it too (companion_matrix.py), as they do an epoch count
    n = passes.threads(spec.threads)
    ctx.settings.update(backend.set_threads(ctx, n))
    data = datasets.for_context(ctx)
    package, model = passes.model_parts(cell.model, cell.framework)  # Unsupported for a model without passes (GCN)
    workload = model.build(ctx, data)
    forward, gradient, sync = passes.module(cell.framework).build(ctx, model, workload,
                                                                  package.pass_batch(workload, data, batch))
    events.log(RUN_START, event_type=START)
    timing = {name: operators.blocked_time(fn, sync, **spec.timing)
              for name, fn in (("forward", forward), ("gradient", gradient))}
    events.log(RUN_STOP, event_type=END, status=SUCCESS)
    out: dict[str, Any] = {"batch": batch, "threads": n, "settings": ctx.settings, "throughput_unit": "batches/s"}
    for name, t in timing.items():
        out |= {f"{name}_median_s": t["median_s"], f"{name}_iqr_s": t["iqr_s"], f"{name}_blocks": t["blocks"],
                f"{name}_block_size": t["block_size"], f"{name}_block_times_s": t["times_s"]}
    return out


def summarise(events: list[dict[str, Any]], cell) -> dict[str, Any]:
    """Nothing to rebuild from the event log: the cell's measurements are all in its child's result (block timings)."""
    return {}
