"""What this host's device tools say: NVML (pynvml) or nvidia-smi on CUDA, npu-smi on Ascend; and what a run's env.json
recorded of them. The one module that runs them: what a device is, by name, is harness.devices.catalog's question, and
what a cell needs against its memory harness.devices.memory's; this module only reads.

    host_memory(platform)      -> (GiB of the smallest device, how it was read)
    device_name(platform)      -> the first accelerator's name as its tool reports it
    run_device(platform, env)  -> the accelerator a run's env.json recorded
    gpu_count()                -> the GPUs `nvidia-smi -L` lists
    nvidia_info()              -> each GPU's name, driver and memory (`nvidia-smi --query-gpu`), as env.json keeps it
    npu_smi_info()             -> `npu-smi info`'s text, as env.json keeps it
    npu_chip(text)             -> the Ascend chip that text names
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from harness.devices import catalog


def _run(argv: list[str], timeout: float = 30, ok: bool = False) -> str | None:
    """The program's standard output; None where it is missing or cannot run (with ok=True: or exits non-zero, and
    then stripped)."""
    if not shutil.which(argv[0]) and not os.path.exists(argv[0]):
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if ok:
        return p.stdout.strip() if p.returncode == 0 else None
    return p.stdout


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


def npu_chip(text: str) -> str | None:
    """The Ascend chip `npu-smi info`'s text names, as harness.devices.catalog names it: "Ascend910B" for a 910B3,
    "Ascend910" for a 910A or 910ProB; None where it names no 910."""
    chips = sorted((d.reported for d in catalog.DEVICES if d.platform == "ascend" and d.reported), key=len,
                   reverse=True)   # Ascend910B before Ascend910
    return next((c for c in chips if c.removeprefix("Ascend") in text), None)


def device_name(platform: str) -> str | None:
    """The accelerator's name as its tool reports it (nvidia-smi's first GPU; "Ascend910" or "Ascend910B" from
    npu-smi); None on a CPU or where the tool is missing."""
    if platform == "cuda":
        out = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"])
        return (out.strip().splitlines() or [None])[0] if out is not None else None
    if platform == "ascend":
        out = _run(["npu-smi", "info"])
        return npu_chip(out) if out is not None else None
    return None


def run_device(platform: str | None, env: dict[str, Any]) -> str | None:
    """The accelerator a run's cells trained on, named as device_name names it, from the run's env.json: the GPU
    PyTorch saw (frameworks.torch.gpus[0], else nvidia-smi's first), the Ascend chip npu-smi reported; None on a
    CPU."""
    if platform == "cuda":
        seen = ((env.get("frameworks") or {}).get("torch") or {}).get("gpus") or \
            [g.get("name") for g in (env.get("nvidia") or {}).get("gpus") or [] if isinstance(g, dict)]
        return seen[0] if seen else None
    if platform == "ascend":
        return npu_chip(str((env.get("ascend") or {}).get("npu_smi_info") or ""))
    return None


def gpu_count() -> int | None:
    """The GPUs `nvidia-smi -L` lists; None where nvidia-smi is missing or cannot run."""
    out = _run(["nvidia-smi", "-L"])
    return None if out is None else sum(1 for line in out.splitlines() if line.startswith("GPU "))


def nvidia_info() -> dict[str, Any] | None:
    """Each GPU's name, driver and memory as `nvidia-smi --query-gpu=name,driver_version,memory.total` gives them
    (env.json's "nvidia"), and the first one's driver; None where nvidia-smi is missing or fails."""
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], 60, ok=True)
    if not out:
        return None
    gpus = [dict(zip(("name", "driver", "memory"), (s.strip() for s in line.split(",")), strict=False))
            for line in out.splitlines()]
    return {"gpus": gpus, "driver": gpus[0]["driver"] if gpus else None}


def npu_smi_info() -> str | None:
    """`npu-smi info`'s text (env.json's "ascend"."npu_smi_info"); None where npu-smi is missing or fails."""
    return _run(["npu-smi", "info"], 60, ok=True)
