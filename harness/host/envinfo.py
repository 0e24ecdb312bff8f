"""The environment a run was measured in, as JSON (`python -m harness env`, DIR/env.json).

Framework versions are read in a separate interpreter per framework, so a broken install shows
up here as an error string rather than a crash, and the parent stays free of framework state.
"""

from __future__ import annotations

import datetime as _dt
import glob
import importlib.metadata as md
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.devices import query
from harness.host import allocator, configdiff
from harness.paths import REPO

PACKAGES = ("torch", "torch_npu", "mindspore", "numpy", "scipy", "jinja2", "psutil", "nvidia-ml-py")
_PROBE = {
    "torch": "import torch, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
             "'cudnn': torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None, "
             "'cuda_available': torch.cuda.is_available(), "
             "'gpus': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}))",
    "mindspore": "import mindspore, json; print(json.dumps({'mindspore': mindspore.__version__}))",
}


def _run(cmd: list[str], timeout: float = 60) -> str | None:
    if not shutil.which(cmd[0]) and not os.path.exists(cmd[0]):
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.stdout.strip() if p.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    """This host's CPU as /proc/cpuinfo names it (what env.json records, and the check compares)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model Name")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_for(platform: str) -> str | None:
    """On the CPU platform, this host's model: what picks the nearest CPU's committed run (harness.paths.expected_run)
    for an estimate; on a GPU or NPU host None (their estimates read the reference CPU runs only)."""
    return cpu_model() if platform == "cpu" else None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _probe(name: str) -> dict[str, Any]:
    if _versions().get(name) is None:
        return {"error": "not installed"}
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE[name]], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"error": "import timed out"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["import failed"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ascend() -> dict[str, Any] | None:
    if not glob.glob("/dev/davinci[0-9]*") and not os.path.exists("/usr/local/Ascend"):
        return None
    cann = None
    for cfg in glob.glob("/usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info") + \
            glob.glob("/usr/local/Ascend/ascend-toolkit/latest/version.cfg"):
        for line in Path(cfg).read_text(errors="replace").splitlines():
            if line.lower().startswith(("version=", "toolkit_installed_version=")):
                cann = line.split("=", 1)[1].strip().strip('"[]')
    npu = query.npu_smi_info()
    return {"cann": cann, "devices": len(glob.glob("/dev/davinci[0-9]*")), "npu_smi_info": npu}


def _distro() -> str | None:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        return None


def _git() -> dict[str, Any]:
    commit = _run(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    dirty = _run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": bool(dirty) if commit else None}


def _container() -> dict[str, Any] | None:
    inside = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    image = os.environ.get("HARNESS_IMAGE")
    return {"image": image} if inside or image else None


def capture(probe_frameworks: bool = True) -> dict[str, Any]:
    env: dict[str, Any] = {
        "captured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "os": {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
               "distro": _distro()},
        "cpu": {"model": cpu_model(), "cores": os.cpu_count(),
                "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None},
        "memory_gib": _memory_gib(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        # The memory allocators this host can preload and the one each framework's cells get
        # (harness/host/allocator.py).
        "allocators": {"available": allocator.available(),
                       "per_framework": {fw: allocator.choose(fw)[0] for fw in allocator.PREFERENCE},
                       "operator_cells_on_cpu": {fw: allocator.choose(fw, platform="cpu", kind="operator")[0]
                                                 for fw in allocator.PREFERENCE}},
        # Transparent huge pages and the CPU governor: set by the host, compared by harness/host/configdiff.py.
        "host_tuning": configdiff.host_tuning(),
        "packages": _versions(),
        "nvidia": query.nvidia_info(),
        "ascend": _ascend(),
        "git": _git(),
        "container": _container(),
        "command": sys.argv,
    }
    if probe_frameworks:
        env["frameworks"] = {name: _probe(name) for name in _PROBE}
    return env
