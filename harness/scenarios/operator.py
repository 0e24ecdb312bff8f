"""Time one operator configuration (a `kind: operator` cell) in this process, one of its repeats: warm-up, blocks of
at least harness.operators.SWEEP_TIMING's iterations and time, median and IQR of the per-iteration time over blocks,
every block kept (the ratio's interval resamples the repeats and their blocks: harness.measure.block_replicates)."""

from __future__ import annotations

import importlib
import os
import subprocess
from typing import Any

from harness import operators
from harness.eventlog import END, RUN_START, RUN_STOP, START, SUCCESS

# Dense peak FLOP/s of known accelerators (vendor datasheets), by name fragment and dtype.
PEAKS = {("V100", "fp32"): 15.7e12, ("V100", "fp16"): 125e12, ("A100", "fp32"): 19.5e12,
         ("A100", "fp16"): 312e12, ("A100", "bf16"): 312e12, ("H100", "fp32"): 67e12, ("H100", "fp16"): 989e12,
         ("H100", "bf16"): 989e12, ("Ascend910", "fp16"): 256e12}


def _device_name(platform: str) -> str | None:
    cmd = {"cuda": ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
           "ascend": ["npu-smi", "info"]}.get(platform)
    if not cmd:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return "Ascend910" if platform == "ascend" and "910" in out else (out.strip().splitlines() or [None])[0]


def run(ctx, backend, events) -> dict[str, Any]:
    cell = ctx.cell
    shape = dict(cell.spec.shape)  # a plain dict: the result stores it as JSON
    dtype, direction = cell.spec.dtype, cell.spec.direction
    if ctx.platform == "cpu":  # one compute thread per core the runner gave it (harness.operators.CPU_CORES)
        ctx.settings.update(backend.set_threads(ctx, len(os.sched_getaffinity(0))))
    impl = importlib.import_module(f"harness.operators.{cell.framework}")
    run_once, sync = impl.build(cell.op, shape, dtype, direction, ctx,
                                operators.arrays(cell.op, shape, cell.seed))
    events.log(RUN_START, event_type=START)
    timing = operators.blocked_time(run_once, sync, **operators.SWEEP_TIMING)
    events.log(RUN_STOP, event_type=END, status=SUCCESS)
    batch = shape["batch"]
    flop = operators.flops(cell.op, shape, direction)
    name = _device_name(ctx.platform)
    peak = next((v for (frag, dt), v in PEAKS.items() if name and frag in name and dt == dtype), None)
    fps = flop / timing["median_s"]
    return {"op": cell.op, "params": operators.params(cell.op, shape), "shape": shape, "dtype": dtype,
            "direction": direction, "median_s": timing["median_s"], "iqr_s": timing["iqr_s"],
            "block_size": timing["block_size"], "blocks": timing["blocks"], "block_times_s": timing["times_s"],
            "throughput": batch / timing["median_s"], "throughput_unit": "samples/s", "flops": flop,
            "flops_per_s": fps, "device_name": name, "peak_flops_per_s": peak,
            "percent_of_peak": 100 * fps / peak if peak else None}


def summarise(events: list[dict[str, Any]], cell) -> dict[str, Any]:
    """Nothing to rebuild: an operator cell's measurements are all in its child's result (one block timing)."""
    return {}
