"""Train a model to its target, MLPerf style, and measure throughput per epoch.

The time-to-target clock starts (run_start) before the data is touched, runs through data
loading, model building, training and evaluation, and stops at the first evaluation that reaches
the target. Training goes on for the profile's epochs after that, so the curve (Figure 3) shows
the whole run, unless the profile sets `stop_at_target` (as MLPerf does; the `target` profile). With
`evals_per_epoch` = k, each epoch trains in k parts, each followed by an evaluation (and logged as its own
epoch_start/epoch_stop block), so a model that crosses its target within an epoch is caught there.
Throughput counts training time only: the step's device work is finished (the workload reads the
loss back) before the epoch's clock is read.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable
from statistics import mean
from typing import Any

import numpy as np

from harness import data as datasets
from harness import profiling
from harness.contracts import PartialEpochWorkload
from harness.errors import HarnessError
from harness.models import model_module, model_package
from harness.results import eventlog, mlperf


def run(ctx, backend, events) -> dict[str, Any]:
    cell = ctx.cell
    spec = cell.spec
    build = model_module(cell.model, cell.framework).build  # import before the clock: not data work
    events.log(eventlog.RUN_START, event_type=eventlog.START)
    data = datasets.for_context(ctx)
    workload = build(ctx, data)
    mlperf.log_workload(events, ctx, workload, data, model_package(cell.model), datasets.module(spec.dataset))
    parts = spec.evals_per_epoch
    train = _trainer(workload, cell, parts)
    best = float("-inf")
    train_times: list[float] = []
    for epoch, part in itertools.product(range(spec.epochs), range(parts)):
        # With evals_per_epoch, each part of an epoch is one epoch_start/epoch_stop block with its own
        # evaluation, so time to target is known to a fraction of an epoch; `part` says which.
        block = {"epoch_num": epoch, **({"part": part, "parts": parts} if parts > 1 else {})}
        events.log(eventlog.EPOCH_START, event_type=eventlog.START, **block)
        t = time.perf_counter()
        loss, samples = train(part, parts)
        backend.synchronize(ctx)
        train_s = time.perf_counter() - t
        train_times.append(train_s)
        events.log(eventlog.EPOCH_STOP, event_type=eventlog.END, train_s=train_s, samples=samples, loss=loss, **block)
        events.log(eventlog.EVAL_START, event_type=eventlog.START, **block)
        metric = workload.evaluate("val")
        best = max(best, metric)
        events.log(eventlog.EVAL_ACCURACY, metric, **block)
        events.log(eventlog.EVAL_STOP, event_type=eventlog.END, **block)
        if spec.stop_at_target and best >= spec.target:
            break  # time to target is measured; further epochs would only lengthen the run
    # Training stops here (MLPerf's run_stop); the test evaluation comes after it, out of the run's time.
    events.log(eventlog.RUN_STOP, event_type=eventlog.END,
               status=eventlog.SUCCESS if best >= spec.target else eventlog.ABORTED)
    events.log(eventlog.TEST_METRIC, workload.evaluate("test"))
    if ctx.profile_dir is not None:   # why the step takes what it takes: out of every measured figure
        steady = train_times[parts:]   # the measured epochs after the first (the first compiles and warms up)
        epoch_s = sum(steady) * parts / len(steady) if steady else None
        # Run by the child once telemetry has stopped: the profiler's memory is no part of the cell's peak.
        return {profiling.AFTER: lambda: profiling.profiled_epoch(ctx, backend, workload, epoch_s)}
    if ctx.world_size == 1:
        return {}
    digest = hashlib.sha256()
    for array in workload.state_arrays():
        digest.update(np.ascontiguousarray(array).tobytes())
    return {"state_sha256": digest.hexdigest()}  # data parallel keeps every rank's weights identical


def _trainer(workload, cell, parts: int) -> Callable[[int, int], tuple[float, int]]:
    """train(part, parts) -> (mean loss, samples): a whole epoch through train_epoch, or a part of one through
    train_part where the profile evaluates several times an epoch."""
    if parts == 1:
        return lambda part, parts: (workload.train_epoch(), workload.samples_per_epoch)
    if not isinstance(workload, PartialEpochWorkload):
        raise HarnessError(f"model {cell.model} ({cell.framework}) cannot train an epoch in parts (its workload has "
                           f"no train_part); set evals_per_epoch = 1 for it in the matrix file")
    return workload.train_part


def _evals(evs):
    return [e for e in evs if e["key"] == eventlog.EVAL_ACCURACY]


def summarise(events: list[dict[str, Any]], cell) -> dict[str, Any]:
    """Measurements from an event log; works on the partial log of a cell that died."""
    spec = cell.spec
    start = next((e["elapsed_s"] for e in events if e["key"] == eventlog.RUN_START), 0.0)
    epochs = [e["metadata"] for e in events if e["key"] == eventlog.EPOCH_STOP]
    throughputs = [m["samples"] / m["train_s"] for m in epochs if m["train_s"] > 0]
    curve = [[round(e["elapsed_s"] - start, 6), e["value"]] for e in _evals(events)]
    ttt = next((t for t, v in curve if v >= spec.target), None)
    test = next((e["value"] for e in events if e["key"] == eventlog.TEST_METRIC), None)
    return {
        "metric": spec.metric, "target": spec.target,
        "best_metric": max((v for _, v in curve), default=None),
        "test_metric": test,
        "time_to_target_s": ttt,
        "first_epoch_throughput": throughputs[0] if throughputs else None,
        "mean_throughput_other_epochs": mean(throughputs[1:]) if len(throughputs) > 1 else None,
        "throughput_unit": spec.throughput_unit,
        "curve": curve,
        "epochs": [{"epoch": m["epoch_num"], **({"part": m["part"]} if "part" in m else {}),
                    "train_s": m["train_s"], "samples": m["samples"],
                    "throughput": m["samples"] / m["train_s"] if m["train_s"] > 0 else None,
                    "loss": m["loss"]} for m in epochs],
        "epochs_planned": spec.epochs,
        "wall_s": events[-1]["elapsed_s"] - start if events else None,
    }
