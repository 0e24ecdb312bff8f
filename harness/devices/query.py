"""This host's device memory, read from the device's own tools: NVML (pynvml) or nvidia-smi on CUDA, npu-smi's HBM
column on Ascend. What a cell needs against it is harness.devices.memory's question; this module only reads.
"""

from __future__ import annotations

import shutil
import subprocess


def host_memory(platform: str) -> tuple[float | None, str]:
    """(GiB of the smallest device the platform shows, how it was read); (None, why not) where it cannot be read.
    NVML through pynvml where installed, else nvidia-smi; npu-smi info's HBM column on Ascend."""
    if platform == "cuda":
        return _nvml() or _nvidia_smi()
    if platform == "ascend":
        return _npu_smi()
    return None, "no accelerator on the cpu platform"


def _nvml() -> tuple[float, str] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            totals = [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).total
                      for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return (min(totals) / 2**30, "NVML") if totals else None


def _run(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def nvidia_smi_gib(text: str) -> float | None:
    """The smallest GPU's memory in `nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits` (MiB)."""
    mib = [float(line) for line in text.split() if line.replace(".", "", 1).isdigit()]
    return min(mib) / 1024 if mib else None


def _nvidia_smi() -> tuple[float | None, str]:
    out = _run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"])
    gib = nvidia_smi_gib(out or "")
    return (gib, "nvidia-smi") if gib else (None, "neither NVML nor nvidia-smi reported a GPU's memory")


def npu_smi_gib(text: str) -> float | None:
    """The smallest chip's HBM (else DDR) in `npu-smi info`'s table, in GiB (harness.telemetry.npusmi parses it)."""
    from harness.telemetry import npusmi

    totals = [t for chip in npusmi.parse_info(text)["chips"] if (t := npusmi.chip_memory(chip)[1])]
    return min(totals) / 1024 if totals else None


def _npu_smi() -> tuple[float | None, str]:
    gib = npu_smi_gib(_run(["npu-smi", "info"]) or "")
    return (gib, "npu-smi info") if gib else (None, "npu-smi info reported no NPU's memory")
