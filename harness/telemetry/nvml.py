"""NVIDIA GPUs through NVML, with the maintained `nvidia-ml-py` package (module `pynvml`), imported only
here and only when a cuda cell starts its sampler.

Per sample, for the one GPU this process uses: memory used on the device (all processes'; NVML's
per-process figure is recorded too where the driver shows this process, which it does not inside some
containers' PID namespaces), power draw, the board's cumulative energy counter (Volta and newer; the
energy then comes from the counter instead of integrating the power samples) and GPU utilisation.
A query the GPU does not support (NVML_ERROR_NOT_SUPPORTED, e.g. power on some boards) is asked once
and then left out: its value is None, never 0. MIG instances are not sampled (NVML reports their
memory but not their power); a MIG UUID in CUDA_VISIBLE_DEVICES leaves the source unavailable.
"""

from __future__ import annotations

import os
from typing import Any

from harness.telemetry.sampler import Source, SourceUnavailable


def visible_device(local_rank: int, env: dict[str, str] | None = None) -> str:
    """The NVML device a process with this local rank uses: the CUDA_VISIBLE_DEVICES entry (an index or
    a GPU-/MIG- UUID, possibly a prefix), else the rank itself. NVML counts in PCI bus order, CUDA by
    default fastest first; on hosts of identical GPUs (the case this harness measures) they agree, and
    CUDA_DEVICE_ORDER=PCI_BUS_ID makes them agree everywhere."""
    env = os.environ if env is None else env
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if local_rank < len(visible):
        return visible[local_rank]
    return str(local_rank)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSource(Source):
    name = "nvml"
    scope = "device"

    def __init__(self, device: str, pid: int | None = None):
        self.device = device
        self.pid = os.getpid() if pid is None else pid
        self.unsupported: dict[str, str] = {}
        self.meta: dict[str, Any] = {}

    def open(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise SourceUnavailable("pynvml is not importable: install nvidia-ml-py") from None
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise SourceUnavailable(f"nvmlInit failed: {e}") from None
        try:
            self.handle = self._handle()
            self.meta = {"name": _text(pynvml.nvmlDeviceGetName(self.handle)), "device": self.device,
                         "uuid": _text(pynvml.nvmlDeviceGetUUID(self.handle)),
                         "memory_total_mb": pynvml.nvmlDeviceGetMemoryInfo(self.handle).total / 2**20}
        except (pynvml.NVMLError, LookupError) as e:
            pynvml.nvmlShutdown()
            raise SourceUnavailable(f"NVML device {self.device}: {e}") from None

    def _handle(self):
        nv = self.nv
        if self.device.isdigit():
            return nv.nvmlDeviceGetHandleByIndex(int(self.device))
        for i in range(nv.nvmlDeviceGetCount()):  # a UUID, or a prefix of one as CUDA accepts
            h = nv.nvmlDeviceGetHandleByIndex(i)
            if _text(nv.nvmlDeviceGetUUID(h)).startswith(self.device):
                return h
        raise LookupError(f"no GPU whose UUID starts with {self.device}")

    def _ask(self, field: str, fn):
        if field in self.unsupported:
            return None
        try:
            return fn()
        except self.nv.NVMLError as e:
            self.unsupported[field] = str(e)  # asked once: not supported stays not supported
            return None

    def read(self) -> dict[str, Any]:
        nv, h = self.nv, self.handle
        mem = nv.nvmlDeviceGetMemoryInfo(h)  # the one query every GPU answers; its failure is a failed sample
        power_mw = self._ask("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h))
        energy_mj = self._ask("energy_j", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
        util = self._ask("util_pct", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu)
        procs = self._ask("process_memory_mb", lambda: nv.nvmlDeviceGetComputeRunningProcesses(h))
        mine = [p.usedGpuMemory for p in procs or [] if p.pid == self.pid and p.usedGpuMemory is not None]
        return {"device_memory_mb": mem.used / 2**20, "power_w": None if power_mw is None else power_mw / 1000,
                "energy_j": None if energy_mj is None else energy_mj / 1000,
                "util_pct": None if util is None else float(util),
                "process_memory_mb": sum(mine) / 2**20 if mine else None}

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            pass

    def info(self) -> dict[str, Any]:
        return {**self.meta, "unsupported": dict(self.unsupported)}
