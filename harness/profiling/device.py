"""The device's side of a profiled step: how long the accelerator was busy (the union of its kernels' and copies'
intervals on the device timeline, so that kernels overlapping on several streams count once) and how long it waited
for the host, per profiled step. Read from the profiler's device events (PyTorch: torch.profiler's events with device
type CUDA or NPU; MindSpore: the Chrome trace its profiler writes). Null on a CPU, where there is no device timeline.

    busy_seconds(intervals)                    -> the union's length, in the intervals' unit
    timeline(intervals, steps, window_s, ...)  -> the profile's "device" block
    trace_intervals(path)                      -> (name, start_us, end_us) of a Chrome trace's device lanes
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any


def busy_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (any unit; the result is in the same)."""
    total, end = 0.0, None
    start = None
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    if end is not None:
        total += end - start
    return total


def timeline(kernels: list[tuple[str, float, float]], steps: int, window_s: float | None,
             source: str, verified: bool = True,
             category: Callable[[str], str] = lambda name: "other") -> dict[str, Any] | None:
    """The profile's "device" block from the device's events (name, start s, end s) over `steps` profiled steps whose
    wall time was `window_s` (synchronised at both ends). busy_s: the device's busy time per step (the union of its
    events' intervals); wait_s: the rest of the step, when the device had nothing to run (it waited for the host);
    busy_share: busy over the step. by_category_s: each kernel's time per step by its category (`category`: the
    caller's harness.profiling.kernel_category, passed in so that this module imports nothing of its package; a sum,
    so kernels on concurrent streams count each). None without events."""
    if not kernels or steps <= 0:
        return None
    busy = busy_seconds((a, b) for _, a, b in kernels) / steps
    span = (max(b for _, _, b in kernels) - min(a for _, a, _ in kernels)) / steps
    step = window_s / steps if window_s else span   # without a synchronised window: first kernel to last
    by_cat: dict[str, float] = {}
    for name, a, b in kernels:
        by_cat[category(name)] = by_cat.get(category(name), 0.0) + (b - a) / steps
    return {"busy_s": busy, "step_s": step, "wait_s": max(0.0, step - busy),
            "busy_share": min(1.0, busy / step) if step > 0 else None, "kernels_per_step": len(kernels) / steps,
            "by_category_s": {c: v for c, v in by_cat.items() if v > 0}, "source": source, "verified": verified}


def trace_intervals(path: str, lanes: tuple[str, ...] = ("Ascend Hardware", "GPU", "Device")) \
        -> list[tuple[str, float, float]]:
    """Complete events ("ph": "X") of a Chrome trace (MindSpore's trace_view.json) in processes whose name holds one
    of `lanes` (the device's lanes; the host's are "CPU" and the framework's): (name, start s, end s). MindSpore's
    documentation describes the Ascend trace's lanes this way; not verified on a device here."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    pids = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and any(lane in str(e.get("args", {}).get("name", "")) for lane in lanes)}
    return [(e.get("name", ""), float(e["ts"]) / 1e6, (float(e["ts"]) + float(e.get("dur", 0))) / 1e6)
            for e in events if e.get("ph") == "X" and e.get("pid") in pids and "ts" in e]
