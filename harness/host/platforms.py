"""Which accelerators a host shows, and which frameworks its Python has, checked without importing any."""

from __future__ import annotations

import glob
import importlib.util
import sys

from harness.config.cell import PLATFORMS
from harness.devices import query
from harness.errors import HarnessError

# The modules a framework's cells import, per platform (PyTorch on Ascend runs through torch_npu).
FRAMEWORK_MODULES = {"pytorch": ("torch",), "mindspore": ("mindspore",)}
PLATFORM_MODULES = {("ascend", "pytorch"): ("torch_npu",)}
# The PyTorch each platform's lock pins, and why (requirements/<platform>.in, Dockerfile.<platform>'s TORCH_VERSION;
# tests/test_report.py checks both). Shown in the report's environment table. MindSpore is 2.10.0 on all three.
PYTORCH_PINS = {
    "cpu": ("2.13.0", "its CPU build (+cpu, from PyTorch's CPU index); no accelerator stack constrains it: the "
                      "version the CPU lock compares"),
    "cuda": ("2.7.1", "PyPI's Linux x86_64 wheel of it is the CUDA 12.6 build, so the image needs no other index, "
                      "and it still carries V100 (sm_70) kernels, checked in the built image; PyPI releases from 2.11 "
                      "on drop Volta"),
    "ascend": ("2.12.0", "torch_npu 2.12.0 patches PyTorch 2.12.0, and Ascend's compatibility table pairs it with "
                         "CANN 9.1.0 (no CANN is paired with torch_npu 2.13.0)"),
}


def visible_devices(platform: str) -> int:
    if platform == "cpu":
        return 1
    if platform == "cuda":   # nvidia-smi -L's GPUs, else the device files where nvidia-smi is missing or fails
        n = query.gpu_count()
        return n if n is not None else len(glob.glob("/dev/nvidia[0-9]*"))
    if platform == "ascend":
        return len(glob.glob("/dev/davinci[0-9]*"))
    raise HarnessError(f"unknown platform '{platform}'; choose one of: {', '.join(PLATFORMS)}")


def require(platform: str) -> int:
    """The number of devices the platform shows; a one-line error if it shows none."""
    n = visible_devices(platform)
    if n == 0:
        hint = {"cuda": "no NVIDIA GPU visible (nvidia-smi -L lists none, no /dev/nvidia*)",
                "ascend": "no Ascend NPU visible (no /dev/davinci* device)"}[platform]
        raise HarnessError(f"--platform {platform}: {hint}; run on such a host (inside a container, pass the "
                           f"devices through) or use --platform cpu")
    return n


def missing_framework(framework: str, platform: str) -> str | None:
    """Why this Python cannot run the framework's cells on the platform (a module it lacks), or None.

    Only absence counts: a module that is installed but fails to import still runs, and fails, in its cell.
    A cell's verdict is harness.host.plan.Host's, which asks this of every framework; reproduce.sh --native asks it of
    the Python it is about to start, before any harness command runs there.
    """
    modules = FRAMEWORK_MODULES.get(framework, ()) + PLATFORM_MODULES.get((platform, framework), ())
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return (f"{framework} is not installed in this Python ({sys.executable} has no module {', '.join(absent)}); "
            f"install it there to run this cell")
