"""Which accelerators a host shows, checked without importing any framework."""

from __future__ import annotations

import glob
import shutil
import subprocess

from harness.errors import HarnessError

PLATFORMS = ("cpu", "cuda", "ascend")


def visible_devices(platform: str) -> int:
    if platform == "cpu":
        return 1
    if platform == "cuda":
        if shutil.which("nvidia-smi"):
            try:
                out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
                return sum(1 for line in out.splitlines() if line.startswith("GPU "))
            except (OSError, subprocess.SubprocessError):
                pass
        return len(glob.glob("/dev/nvidia[0-9]*"))
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
