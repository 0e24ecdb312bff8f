"""Operators for the sweep (Figure 5): framework-neutral shapes, parameter and FLOP counts, inputs
made once with numpy, and the timing loop both frameworks share.

One file per framework (`harness/scenarios/operator/<framework>.py`) provides
    build(op, shape, dtype, direction, ctx, arrays) -> (run, sync)
where `run()` performs one iteration (forward, or forward and backward) and `sync()` waits for it.

Same semantics on both sides, set explicitly: Conv2d 3x3, stride 1, padding 1, with bias;
Linear/Dense with bias; BatchNorm2d in training mode, momentum 0.1 (PyTorch) = 0.9 (MindSpore), eps 1e-5.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from statistics import median
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.results import measure
from harness.scenarios.operator import turns

BN_EPS = 1e-5
BN_MOMENTUM_PT = 0.1   # PyTorch's convention; MindSpore's momentum is 1 - this


def input_shape(op: str, s: dict[str, int]) -> tuple[int, ...]:
    if op == "conv2d":
        return (s["batch"], s["in_channels"], s["size"], s["size"])
    if op == "linear":
        return (s["batch"], s["in_features"])
    if op == "batchnorm2d":
        return (s["batch"], s["channels"], s["size"], s["size"])
    raise ValueError(f"unknown operator {op}")


def params(op: str, s: dict[str, int]) -> int:
    if op == "conv2d":
        return s["out_channels"] * s["in_channels"] * 9 + s["out_channels"]
    if op == "linear":
        return s["out_features"] * s["in_features"] + s["out_features"]
    return 2 * s["channels"]  # batchnorm2d: gamma and beta


def flops(op: str, s: dict[str, int], direction: str) -> float:
    """Forward FLOPs (a multiply-add counts 2); forward+backward counts 3x the forward (the two
    gradient products each cost about one forward), the usual convention."""
    if op == "conv2d":
        fwd = 2.0 * s["batch"] * s["out_channels"] * s["size"] ** 2 * s["in_channels"] * 9
    elif op == "linear":
        fwd = 2.0 * s["batch"] * s["in_features"] * s["out_features"]
    else:  # batchnorm2d: mean, variance, normalise, scale and shift: about 8 FLOPs per element
        fwd = 8.0 * s["batch"] * s["channels"] * s["size"] ** 2
    return fwd * (3 if direction == "fwd+bwd" else 1)


def arrays(op: str, s: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Input, output gradient and weights, float32, identical for both frameworks."""
    rng = np.random.RandomState(seed)
    x = rng.standard_normal(input_shape(op, s)).astype(np.float32)
    out: dict[str, np.ndarray] = {"x": x}
    if op == "conv2d":
        bound = 1 / np.sqrt(s["in_channels"] * 9)
        out["weight"] = rng.uniform(-bound, bound, (s["out_channels"], s["in_channels"], 3, 3)).astype(np.float32)
        out["bias"] = rng.uniform(-bound, bound, s["out_channels"]).astype(np.float32)
        out["grad"] = rng.standard_normal((s["batch"], s["out_channels"], s["size"], s["size"])).astype(np.float32)
    elif op == "linear":
        bound = 1 / np.sqrt(s["in_features"])
        out["weight"] = rng.uniform(-bound, bound, (s["out_features"], s["in_features"])).astype(np.float32)
        out["bias"] = rng.uniform(-bound, bound, s["out_features"]).astype(np.float32)
        out["grad"] = rng.standard_normal((s["batch"], s["out_features"])).astype(np.float32)
    else:
        out["gamma"] = np.ones(s["channels"], np.float32)
        out["beta"] = np.zeros(s["channels"], np.float32)
        out["grad"] = rng.standard_normal(x.shape).astype(np.float32)
    return out


# The operator sweep's timing (Figure 5), from what operator_noise.py and operator_stability.py measured (docs/
# methodology/operators.md, item 12): blocks of at least 0.02 s, so that a process holds enough blocks in the host's
# fast phase for its statistic (harness.results.measure.fast_time: their 10th percentile); blocks of 0.1 s mixed the
# phases (a vCPU of the 2-core machine ran 1.7x slower, in phases of milliseconds to seconds). Timed by turns
# (harness.scenarios.operator.turns), a cell takes turns.ROUNDS blocks; alone, at least 20 blocks and 0.9 s. MindSpore
# PYNATIVE queues its calls (Conv2d fwd+bwd: 172 ms an iteration synchronised each time, 41-48 ms queued), so its blocks
# hold at least 8 iterations, as before, to spread that latency over many (QUEUED_TIMING); GRAPH's sync alone is
# 0.06-0.16 ms, PyTorch's none. Each cell runs in several processes (at least
# harness.launch.sequential.OPERATOR_MIN_REPEATS, then up to operator_max_repeats while its ratio's interval is wide),
# since the host's state differs more between the groups of processes than between the blocks of one.
SWEEP_TIMING = {"min_block_s": 0.02, "min_block_iters": 1, "min_run_s": 0.9, "min_blocks": 20}
QUEUED_TIMING = {**SWEEP_TIMING, "min_block_iters": 8}


# Address-space layout randomisation off in an operator process on a CPU (personality(ADDR_NO_RANDOMIZE), what
# `setarch -R` does): every process of a cell then puts its code, heap and buffers at the same virtual addresses, and
# a cell's processes stop landing on different speeds by where their buffers fell. Measured on the 2-core machine:
# PyTorch Conv2d fwd 16->64's fastest block over 6 processes each, 3,356-4,185 us with randomisation, 3,440-3,600 us
# without; in two quick sweeps, with the fast quantile, 2 of 24 ratios within ±5% with it, 16 of 24 without
# (docs/methodology/operators.md). Where the kernel or a container's seccomp profile refuses the call (Docker's
# default allows personality() only for a few values), the process runs as it is and its result says so.
ADDR_NO_RANDOMIZE = 0x0040000   # <sys/personality.h>


def _personality(persona: int) -> int:
    import ctypes

    return ctypes.CDLL(None, use_errno=True).personality(ctypes.c_ulong(persona))


def fixed_layout() -> bool:
    """Turn address randomisation off for the programs this process execs; True when the caller should exec itself
    again to get it (it was on and the kernel took the change), False when it is already off or cannot be."""
    current = _personality(0xFFFFFFFF)
    if current == -1 or current & ADDR_NO_RANDOMIZE:
        return False
    return _personality(current | ADDR_NO_RANDOMIZE) != -1 and bool(_personality(0xFFFFFFFF) & ADDR_NO_RANDOMIZE)


def layout_state() -> str:
    """What this process runs with, for its result's settings."""
    current = _personality(0xFFFFFFFF)
    return "unknown" if current == -1 else "off" if current & ADDR_NO_RANDOMIZE else "on (personality() refused)"


def sweep_timing(framework: str, mode: str) -> dict[str, Any]:
    """The block timing of an operator cell: QUEUED_TIMING for a framework mode that queues calls (PYNATIVE)."""
    return QUEUED_TIMING if (framework, mode) == ("mindspore", "pynative") else SWEEP_TIMING


# On a CPU host an operator cell's process is confined to one core, and both frameworks compute on one thread
# (docs/methodology/operators.md, item 10). What two threads gain changes with the host: on the 2-core
# machine PyTorch's Linear fwd 64->512 ran 33-35 us in some processes and 45-53 us in others, MindSpore PYNATIVE's
# Conv2d fwd 4.3 or 8.0-8.3 ms, by the minute, in both frameworks alike, so a ratio between two such processes moved
# by up to 38% from sweep to sweep. On one core the same cells kept their time within 2.4% from process to process.
# It also leaves the runner and the host's other work a core of their own. The figure is then a per-core comparison:
# each framework's kernels and dispatch on one core, the way torch.utils.benchmark.Timer times (one thread by
# default); the models, the passes and the inference cells keep every core. HARNESS_OPERATOR_CORES=N (or `all`)
# changes it for a run: on a host whose cores keep their speed, a comparison on all of them.
CPU_CORES = 1


def cpu_cores(platform: str, kind: str, available: set[int] | None = None) -> list[int] | None:
    """The cores an operator cell's process is confined to on a CPU host: the first CPU_CORES (or
    $HARNESS_OPERATOR_CORES: a number, or `all`) of those the runner may run on (`available`, default: this process's
    affinity). None for other kinds and platforms, and for `all`: no confinement."""
    if platform != "cpu" or kind != "operator":
        return None
    cores = sorted(os.sched_getaffinity(0) if available is None else available)
    wanted = os.environ.get("HARNESS_OPERATOR_CORES", "").strip() or str(CPU_CORES)
    if wanted == "all":
        return None
    if not wanted.isdigit() or int(wanted) < 1:
        raise HarnessError(f"HARNESS_OPERATOR_CORES={wanted} is not a number of cores; give one of 1-{len(cores)}, "
                           "or 'all'")
    return cores[:int(wanted)]


def blocked_time(run: Callable[[], Any], sync: Callable[[], None], *, min_block_s: float = 0.05,
                 min_block_iters: int = 1, min_run_s: float = 1.0, min_blocks: int = 7,
                 warmup: int = 3) -> dict[str, Any]:
    """Per-iteration time, torch.utils.benchmark style: warm up; grow the block (number of
    iterations timed together, at least min_block_iters) until one block takes min_block_s, so the
    clock and the sync are negligible; then time blocks until min_run_s and min_blocks are reached.
    The device is synchronised before every clock read. Returns median and IQR over blocks, and
    every block's per-iteration time."""
    n = block_size(run, sync, min_block_s, min_block_iters, warmup)
    times, total = [], 0.0
    while total < min_run_s or len(times) < min_blocks:
        times.append(one_block(run, sync, n))
        total += times[-1] * n
    return block_summary(times, n)


def block_size(run: Callable[[], Any], sync: Callable[[], None], min_block_s: float, min_block_iters: int = 1,
               warmup: int = 3) -> int:
    """Warm up, then grow the block (iterations timed together, at least min_block_iters) until one takes
    min_block_s."""
    for _ in range(warmup):
        run()
    sync()
    n = max(1, int(min_block_iters))
    while True:
        t = time.perf_counter()
        for _ in range(n):
            run()
        sync()
        dt = time.perf_counter() - t
        if dt >= min_block_s or n >= 1 << 20:
            return n
        n = max(n * 2, int(n * min_block_s / max(dt, 1e-9) * 1.2))


def one_block(run: Callable[[], Any], sync: Callable[[], None], n: int) -> float:
    """One block of n iterations, the device synchronised before the clock is read: seconds per iteration."""
    t = time.perf_counter()
    for _ in range(n):
        run()
    sync()
    return (time.perf_counter() - t) / n


def turn_time(run: Callable[[], Any], sync: Callable[[], None], spec: dict[str, Any], *, min_block_s: float,
              min_block_iters: int = 1, warmup: int = 3, **_) -> dict[str, Any]:
    """blocked_time's figures from blocks timed by turns with the configuration's other cells
    (harness.scenarios.operator.turns).

    The block is sized in the group's sizing round, this process alone on the core (docs/methodology/operators.md,
    item 15): sized while a partner was still setting up on the same core, as before, a block came out 2-4x too
    short in some processes (MindSpore's BatchNorm2d fwd+bwd 16: 6 iterations against 20-26), and a short block
    carries more of what each turn costs before the first iteration, so those processes ran up to 20% slower and
    split a configuration's groups in two. Each block is then preceded by one untimed iteration: the partner's block
    has just evicted this process's data and its threads have slept (with a partner emulated, 6-iteration blocks ran
    14% slower than 24-iteration ones, 6% with the untimed iteration)."""
    sized: list[int] = []

    def block() -> float:
        run()
        sync()
        return one_block(run, sync, sized[0])

    taken = turns.take_turns(spec, block, size=lambda: sized.append(
        block_size(run, sync, min_block_s, min_block_iters, warmup)))
    n = sized[0]
    return block_summary(taken["times"], n) | {
        "turns": {k: spec[k] for k in ("group", "position", "cells", "rounds")},
        "probe_s": taken["probe_s"]}


def block_summary(times: list[float], n: int) -> dict[str, Any]:
    q = np.percentile(times, [25, 75])
    return {"median_s": median(times), "iqr_s": float(q[1] - q[0]), "fast_s": float(measure.fast_time(times)),
            "block_size": n, "blocks": len(times), "times_s": times}
