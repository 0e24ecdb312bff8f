"""Ask each framework for the GPU, in the process environment the harness gives its cells, and say why it failed.

    python tools/gpu_probe.py [mindspore|pytorch ...]      (one JSON line per framework)

Each framework runs in its own process (as the harness runs cells), with `process_env("cuda")` of its back-end:
MindSpore selects its GPU plug-in there (CUDA_HOME -> `$CUDA_HOME/bin/nvcc --version` -> libmindspore_gpu.so.11.x).
The step is one tiny op read back to the host. Where no NVIDIA driver is mounted (CI, a container started
without the NVIDIA toolkit), the only acceptable failure is the missing driver: tools/check_cuda_image.sh
checks that with `verdict()` below, so a plug-in that is never tried, or a CUDA library missing from the
image, fails the image check even on a machine without a GPU.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

STEP = {
    # set_device, then one op whose result comes back to the host (the device context is made lazily).
    "mindspore": "import mindspore as ms, numpy as np\n"
                 "ms.set_device('GPU')\n"
                 "x = ms.Tensor(np.ones(4, np.float32))\n"
                 "print('result', (x + x).asnumpy().tolist())\n",
    "pytorch": "import torch\n"
               "x = torch.ones(4, device='cuda')\n"
               "torch.cuda.synchronize()\n"
               "print('result', (x + x).cpu().tolist(), torch.cuda.get_device_name())\n",
}
MISSING_LIB = re.compile(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file")
# MindSpore lists each plug-in it tried: "Load dynamic library: libmindspore_gpu.so.11.6 failed. libcuda.so.1: ...".
# Its Ascend plug-ins are always tried too and fail in a CUDA image (no CANN there): only the GPU lines count.
PLUGIN_LOAD = re.compile(r"Load dynamic library: (libmindspore_gpu\S*) failed\. (.*)")


def probe(framework: str, timeout: float = 300) -> dict:
    sys.path.insert(0, str(REPO))
    from harness.frameworks import backend as load_backend

    extra = load_backend(framework).process_env("cuda")
    env = {**os.environ, **extra,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run([sys.executable, "-c", STEP[framework]], env=env, capture_output=True, text=True,
                              timeout=timeout)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out, code = f"timed out after {timeout} s: {e.output or ''}", None
    return {"framework": framework, "process_env": extra, "returncode": code, "ok": code == 0,
            "output": out[-4000:]}


def verdict(result: dict) -> str | None:
    """None when the framework failed for the one acceptable reason on a host without a driver (or passed);
    else what is wrong, in one line."""
    if result["ok"]:
        return None
    out = result["output"]
    missing = sorted(set(MISSING_LIB.findall(out)))
    if result["framework"] == "mindspore":
        # MindSpore ends with "Unsupported device target GPU" whether or not it tried a plug-in: the list of
        # plug-ins it tried ("Device load error message") tells the cases apart.
        if "can not find suitable gpu plugin" in out:
            return "MindSpore found no GPU plug-in for the nvcc under CUDA_HOME (it needs release 11.1 or 11.6-11.8)"
        tried = sorted(set(PLUGIN_LOAD.findall(out)))  # MindSpore logs each line, then repeats it in the error
        if not tried:
            return "MindSpore never tried a GPU plug-in (Unsupported device target GPU): is CUDA_HOME set?"
        if {plugin for plugin, _ in tried} != {"libmindspore_gpu.so.11.6"}:
            return f"MindSpore tried GPU plug-ins {sorted({p for p, _ in tried})}, not libmindspore_gpu.so.11.6 alone"
        if len(tried) > 1:
            return f"libmindspore_gpu.so.11.6 failed for several reasons: {[why.strip()[:120] for _, why in tried]}"
        gpu_missing = sorted(set(MISSING_LIB.findall(tried[0][1])))
        if gpu_missing != ["libcuda.so.1"]:
            return ("libmindspore_gpu.so.11.6 failed for another reason than the driver's libcuda.so.1: "
                    f"{tried[0][1].strip()[:200]}")
        return None
    if missing:
        return f"PyTorch lacks libraries: {missing}"
    if not re.search(r"NVIDIA driver", out):
        return "PyTorch failed for a reason other than the missing NVIDIA driver"
    return None


def main(argv: list[str]) -> int:
    bad = 0
    for fw in argv or list(STEP):
        result = probe(fw)
        result["verdict"] = verdict(result)
        bad += result["verdict"] is not None
        print(json.dumps(result))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
