"""Time one operator configuration (a `kind: operator` cell) in this process, one of its repeats: warm-up, blocks of
at least harness.scenarios.operator.ops.sweep_timing's iterations and time, the fast quantile, median and IQR of the
per-iteration time over blocks, every block kept (the ratio's interval resamples the repeats and their blocks:
harness.results.measure.block_replicates; timed by turns, Student's t over the groups:
harness.results.measure.paired_replicates)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from harness.devices import catalog, query
from harness.results.eventlog import END, RUN_START, RUN_STOP, START, SUCCESS
from harness.scenarios.operator import ops as operators


def run(ctx, backend, events) -> dict[str, Any]:
    cell = ctx.cell
    shape = dict(cell.spec.shape)  # a plain dict: the result stores it as JSON
    dtype, direction = cell.spec.dtype, cell.spec.direction
    # one compute thread per core the runner gave it (harness.scenarios.operator.ops.CPU_CORES)
    if ctx.platform == "cpu":
        ctx.settings.update(backend.set_threads(ctx, len(os.sched_getaffinity(0))))
    impl = importlib.import_module(f"harness.scenarios.operator.{cell.framework}")
    run_once, sync = impl.build(cell.op, shape, dtype, direction, ctx,
                                operators.arrays(cell.op, shape, cell.seed))
    events.log(RUN_START, event_type=START)
    block = operators.sweep_timing(cell.framework, cell.mode)
    # With the configuration's other cells alive beside it (the runner's turn group: harness.scenarios.operator.turns),
    # one block each in turn; alone (a partner kept from an earlier invocation, or not in this run), blocks back to
    # back.
    timing = operators.turn_time(run_once, sync, ctx.turns, **block) if ctx.turns else \
        operators.blocked_time(run_once, sync, **block)
    events.log(RUN_STOP, event_type=END, status=SUCCESS)
    batch = shape["batch"]
    flop = operators.flops(cell.op, shape, direction)
    name = query.device_name(ctx.platform)
    peak = catalog.peak(name, dtype)   # dense peak FLOP/s: one table for the operator and model cells
    # The process's time is the fast quantile of its blocks (harness.results.measure.fast_time); the median is kept
    # beside it.
    fps = flop / timing["fast_s"]
    return {"op": cell.op, "params": operators.params(cell.op, shape), "shape": shape, "dtype": dtype,
            "direction": direction, "fast_s": timing["fast_s"], "median_s": timing["median_s"],
            "iqr_s": timing["iqr_s"], "block_size": timing["block_size"], "blocks": timing["blocks"],
            "block_times_s": timing["times_s"], "throughput": batch / timing["fast_s"], "throughput_unit": "samples/s",
            "turns": timing.get("turns"), "probe_s": timing.get("probe_s"), "flops": flop,
            "flops_per_s": fps, "device_name": name, "peak_flops_per_s": peak,
            "percent_of_peak": 100 * fps / peak if peak else None}


def summarise(events: list[dict[str, Any]], cell) -> dict[str, Any]:
    """Nothing to rebuild: an operator cell's measurements are all in its child's result (one block timing)."""
    return {}
