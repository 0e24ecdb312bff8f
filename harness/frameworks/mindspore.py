"""MindSpore back-end: GRAPH and PYNATIVE modes on CPU, GPU (CUDA) and Ascend."""

from __future__ import annotations

import platform as _platform
from typing import Any

from harness.errors import Unsupported

NAME = "mindspore"
MODES = ("graph", "pynative")
DEVICE_TARGET = {"cpu": "CPU", "cuda": "GPU", "ascend": "Ascend"}


def process_env(platform: str) -> dict[str, str]:
    env = {"GLOG_v": "2"}  # warnings and errors only: MindSpore's INFO logging costs time and disk
    if platform == "cpu" and _platform.machine() in ("x86_64", "AMD64") and _has_avx512():
        # On AVX-512 CPUs MindSpore 2.10's oneDNN picks a reference kernel for 3x3 convolutions that is
        # ~100x slower; capping the ISA at AVX2 gives the fast JIT kernels (seen on the CI machine).
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    return env


def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512f" in f.read()
    except OSError:
        return False


def setup(ctx) -> dict[str, Any]:
    import mindspore as ms

    if ctx.cell.mode not in MODES:
        raise Unsupported(f"MindSpore mode '{ctx.cell.mode}' is not implemented by this back-end")
    ms.set_context(mode=ms.GRAPH_MODE if ctx.cell.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_device(DEVICE_TARGET[ctx.platform], ctx.local_rank)
    ms.set_seed(ctx.seed)
    return {"device_target": DEVICE_TARGET[ctx.platform], "device_id": ctx.local_rank,
            "mode": "GRAPH_MODE" if ctx.cell.mode == "graph" else "PYNATIVE_MODE"}


def synchronize(ctx) -> None:
    if ctx.platform == "cpu":
        return  # runtime.synchronize() is a no-op on CPU (and logs an error); workloads read results back
    import mindspore as ms

    ms.runtime.synchronize()


def versions() -> dict[str, Any]:
    import mindspore as ms

    return {"mindspore": ms.__version__}


def amp_network(ctx, net):
    """Cast a network for the cell's AMP level (O2: fp16 but BatchNorm and loss in fp32; O3: all fp16).
    Returns the network unchanged with AMP off."""
    if ctx.cell.amp == "off":
        return net
    import mindspore as ms

    return ms.amp.auto_mixed_precision(net, ctx.cell.amp)


def loss_scaler(ctx):
    """Dynamic loss scaling for fp16 on GPU/Ascend; None with AMP off and on CPU, where MindSpore's
    O2/O3 train only without a loss-scale manager."""
    if ctx.cell.amp == "off" or ctx.platform == "cpu":
        return None
    import mindspore as ms

    return ms.amp.DynamicLossScaler(scale_value=2.0**16, scale_factor=2, scale_window=1000)
