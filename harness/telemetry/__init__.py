"""Telemetry beside every cell: device memory, power and energy, utilisation, and process RSS.

The child process (harness/launch/child.py) starts a `Sampler` before the cell's set-up and stops it after
the scenario; every rank of a multi-process cell is its own child and samples itself. Sources by
platform (each optional: a source that cannot measure here is listed under `telemetry.unavailable`
and its keys stay null):

    cpu     psutil (RSS, CPU time) + RAPL CPU-package energy where /sys/class/powercap is readable
    cuda    NVML (nvidia-ml-py) for the GPU the process uses, + the cpu sources
    ascend  npu-smi for the chip the process uses, + the cpu sources

Settings (environment, so they reach every child and launcher rank):
    HARNESS_TELEMETRY=off                 no sampler (the keys stay null; for overhead measurements)
    HARNESS_TELEMETRY_INTERVAL_S=0.1      sampling interval in seconds (default 0.1)
    HARNESS_TELEMETRY_NPU_INTERVAL_S=1.0  lower bound for npu-smi, which runs a program per sample

Result keys (KEYS; null where the platform cannot say, never a made-up 0):
    peak_rss_mb               peak resident memory of the cell's process (kernel high-water mark and samples)
    peak_device_memory_mb     peak memory used on the cell's device (NVML / npu-smi, all processes on it)
    framework_peak_memory_mb  the framework's own peak allocation (torch.cuda / torch.npu / MindSpore runtime
                              max_memory_allocated)
    framework_reserved_memory_mb  the peak its allocator held from the device (max_memory_reserved: allocated and
                              cached), what the device had to have for the framework
    energy_j                  energy over the cell's work (training epochs / timed operator blocks)
    mean_power_w              energy_j / the work's duration
    samples_per_joule         samples processed in that work / energy_j
    mean_utilisation_pct      device busy % over the work, or on CPU the process's share of the usable cores
    total_energy_j            energy over the whole sampled cell (set-up, compilation, evaluation included)
    telemetry_source          "nvml", "npu-smi", "psutil+rapl" or "psutil"
and `telemetry`: scopes, per-source sample counts and errors, and `series[source]` columns (t_s from
run_start, and rss_mb, cpu_pct, power_w, device_memory_mb, util_pct ...) downsampled for figures.
"""

from __future__ import annotations

import os
from typing import Any

from harness.telemetry.sampler import Sampler, Source, SourceUnavailable
from harness.telemetry.summary import merge_ranks, summarise

__all__ = ["KEYS", "Sampler", "Source", "SourceUnavailable", "enabled", "for_platform", "framework_peak",
           "interval_s", "merge_ranks", "null_keys", "summarise"]

KEYS = ("peak_rss_mb", "peak_device_memory_mb", "framework_peak_memory_mb", "framework_reserved_memory_mb",
        "energy_j", "mean_power_w",
        "samples_per_joule", "mean_utilisation_pct", "total_energy_j", "telemetry_source")
DEFAULT_INTERVAL_S = 0.1


def null_keys() -> dict[str, Any]:
    """Every telemetry key as null: what a result holds before (or without) a measurement."""
    return dict.fromkeys(KEYS)


def enabled(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("HARNESS_TELEMETRY", "on").strip().lower() not in ("off", "0", "false", "no")


def interval_s(env: dict[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    raw = env.get("HARNESS_TELEMETRY_INTERVAL_S", "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"HARNESS_TELEMETRY_INTERVAL_S={raw!r} is not a positive number of seconds")
    return value


def for_platform(platform: str, local_rank: int = 0, env: dict[str, str] | None = None) -> Sampler | None:
    """The sampler for a cell's process on this platform, or None when telemetry is switched off."""
    if not enabled(env):
        return None
    from harness.telemetry.cpu import CpuSource

    sources: list[Source] = []
    if platform == "cuda":
        from harness.telemetry.nvml import NvmlSource, visible_device

        sources.append(NvmlSource(visible_device(local_rank, env)))
    elif platform == "ascend":
        from harness.telemetry.npusmi import NpuSmiSource, physical_index

        sources.append(NpuSmiSource(physical_index(local_rank, env)))
    sources.append(CpuSource())
    return Sampler(sources, interval_s(env))


def framework_peak(backend, ctx, stat: str = "peak_memory_mb") -> tuple[float | None, str | None]:
    """(MB, None) from the back-end's `peak_memory_mb(ctx)` (or `stat`: reserved_memory_mb), or (None, why not).
    Never raises: a framework that cannot say must not fail a cell that trained."""
    fn = getattr(backend, stat, None)
    if fn is None:
        return None, f"the {getattr(backend, 'NAME', '?')} back-end has no {stat}"
    try:
        return fn(ctx), None
    except Exception as e:  # noqa: BLE001 - recorded in the result instead
        return None, f"{type(e).__name__}: {e}"[:300]
