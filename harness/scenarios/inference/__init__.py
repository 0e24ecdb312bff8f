"""Inference throughput (a `kind: inference` cell; S1 Table 4, S2's feature extraction): one net in eval mode,
no gradients, at one batch size and AMP level, timed as the operator cells are: warm-up, blocks sized until the
clock and the device sync are negligible, median and IQR of the per-batch time over blocks.

The images are synthetic (throughput does not depend on pixel values). The clock covers the forward pass only:
the batch is on the device before timing starts, as in S1's and S2's inference figures."""

from __future__ import annotations

from typing import Any

from harness.results.eventlog import END, RUN_START, RUN_STOP, START, SUCCESS
from harness.scenarios.inference import nets as inference
from harness.scenarios.operator import ops as operators


def run(ctx, backend, events) -> dict[str, Any]:
    cell = ctx.cell
    name, batch = cell.spec.net, int(cell.spec.batch)
    impl = inference.module(cell.framework)
    run_once, sync, net = impl.build(ctx, name, batch, inference.weights(name, cell.seed),
                                     inference.images(name, cell.seed, batch))
    events.log(RUN_START, event_type=START)
    timing = operators.blocked_time(run_once, sync, **cell.spec.timing)
    events.log(RUN_STOP, event_type=END, status=SUCCESS)
    return {"net": name, "batch": batch, "image_shape": list(inference.input_shape(name, batch)[1:]),
            "parameters": backend.parameter_count(net), "median_s": timing["median_s"], "iqr_s": timing["iqr_s"],
            "block_size": timing["block_size"], "blocks": timing["blocks"], "block_times_s": timing["times_s"],
            "throughput": batch / timing["median_s"], "throughput_unit": "images/s", "images": "synthetic"}


def summarise(events: list[dict[str, Any]], cell) -> dict[str, Any]:
    """Nothing to rebuild from the event log: the cell's measurements are all in its child's result (block timings)."""
    return {}
