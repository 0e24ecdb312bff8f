"""Dense peak FLOP/s per accelerator and precision, for the share of the device's limit a cell reaches (the model
cells' `share of peak` in Table I and the operator cells' `percent_of_peak`).

Sources (dense figures, no 2:4 sparsity; fp32 is the non-tensor-core FP32 rate, fp16/bf16 the tensor cores'):
- V100 SXM2: NVIDIA Tesla V100 datasheet, FP32 15.7 TFLOPS, tensor 125 TFLOPS (no bf16).
- A100 SXM: NVIDIA A100 datasheet, FP32 19.5 TFLOPS, FP16/BF16 tensor 312 TFLOPS.
- H100 SXM5: NVIDIA H100 datasheet, FP32 67 TFLOPS, FP16/BF16 tensor 989 TFLOPS (1,979 with sparsity);
  H100 PCIe: FP32 51 TFLOPS, FP16/BF16 756 TFLOPS.
- H200 SXM: NVIDIA H200 datasheet, FP32 67 TFLOPS, FP16/BF16 989 TFLOPS (1,979 with sparsity); H200 NVL: FP32
  60 TFLOPS, FP16/BF16 835 TFLOPS.
- Ascend 910: Huawei's launch figures (Hot Chips 2019), FP16 256 TFLOPS; no FP32 figure is published.
- Ascend 910B: Huawei publishes no per-chip dense figure in its product documentation; left unknown (the share is
  then null, and the table says no peak is known).
PyTorch lets cuDNN use TF32 for fp32 convolutions by default on Ampere and later, so an fp32 cell's share of the FP32
peak can pass 100% there; the FP32 rate is still the limit an fp32 model is held to.

Memory bandwidth (BANDWIDTH, bytes/s; the estimate's rule for a device no committed run measured,
harness.estimate.devicescale):
- V100: NVIDIA Tesla V100 datasheet, 900 GB/s (SXM2 and PCIe); V100S PCIe: 1,134 GB/s.
- A100: NVIDIA A100 datasheet, 40 GB HBM2 1,555 GB/s; 80 GB HBM2e SXM 2,039 GB/s, PCIe 1,935 GB/s.
- H100: NVIDIA H100 datasheet, SXM5 3.35 TB/s, PCIe 2 TB/s.
- H200: NVIDIA H200 datasheet, SXM and NVL 4.8 TB/s.
- Ascend 910 and 910B: no figure found in a Huawei document checked here; left unknown (the rule then takes the
  peaks alone).
"""

from __future__ import annotations

import subprocess
from typing import Any

# (name fragment, precision) -> FLOP/s; the first fragment found in the device's name wins, so variants come first.
PEAKS: dict[tuple[str, str], float] = {
    ("V100", "fp32"): 15.7e12, ("V100", "fp16"): 125e12,
    ("A100", "fp32"): 19.5e12, ("A100", "fp16"): 312e12, ("A100", "bf16"): 312e12,
    ("H100 PCIe", "fp32"): 51e12, ("H100 PCIe", "fp16"): 756e12, ("H100 PCIe", "bf16"): 756e12,
    ("H100", "fp32"): 67e12, ("H100", "fp16"): 989e12, ("H100", "bf16"): 989e12,
    ("H200 NVL", "fp32"): 60e12, ("H200 NVL", "fp16"): 835e12, ("H200 NVL", "bf16"): 835e12,
    ("H200", "fp32"): 67e12, ("H200", "fp16"): 989e12, ("H200", "bf16"): 989e12,
    ("Ascend910", "fp16"): 256e12,
}

# Devices whose peak is not published: no share of peak, rather than a relative's (the 910's for a 910B).
UNKNOWN = ("Ascend910B",)

# name fragment -> memory bandwidth in bytes/s, variants first (the module docstring's sources).
BANDWIDTH: dict[str, float] = {
    "V100S": 1134e9, "V100": 900e9,
    "A100-SXM4-80GB": 2039e9, "A100 80GB PCIe": 1935e9, "A100": 1555e9,
    "H100 PCIe": 2.0e12, "H100": 3.35e12,
    "H200 NVL": 4.8e12, "H200": 4.8e12,
}

# A model cell's precision from its AMP level: O2/O3 compute in half precision (fp16 on every platform the harness
# runs; bf16's peak is the same on these devices).
AMP_PRECISION = {"off": "fp32", "O1": "fp16", "O2": "fp16", "O3": "fp16"}


def device_name(platform: str) -> str | None:
    """The accelerator's name as its tool reports it (nvidia-smi; "Ascend910" or "Ascend910B" from npu-smi); None on
    a CPU or where the tool is missing."""
    cmd = {"cuda": ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
           "ascend": ["npu-smi", "info"]}.get(platform)
    if not cmd:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if platform == "ascend":
        return "Ascend910B" if "910B" in out else "Ascend910" if "910" in out else None
    return (out.strip().splitlines() or [None])[0]


def run_device(platform: str | None, env: dict[str, Any]) -> str | None:
    """The accelerator a run's cells trained on, named as device_name names it, from the run's env.json: the GPU
    PyTorch saw (frameworks.torch.gpus[0], else nvidia-smi's first), the Ascend chip npu-smi reported; None on a
    CPU."""
    if platform == "cuda":
        seen = ((env.get("frameworks") or {}).get("torch") or {}).get("gpus") or \
            [g.get("name") for g in (env.get("nvidia") or {}).get("gpus") or [] if isinstance(g, dict)]
        return seen[0] if seen else None
    if platform == "ascend":
        info = str((env.get("ascend") or {}).get("npu_smi_info") or "")
        return "Ascend910B" if "910B" in info else "Ascend910" if "910" in info else None
    return None


def kind(name: str | None) -> str | None:
    """The device kind a name is of: the longest fragment of the peaks' or the bandwidths' table found in it ("NVIDIA
    H100 80GB HBM3" -> "H100", "Ascend910B" -> "Ascend910B"), else the name itself. Two names of one kind are one
    device to the estimate (the same figures, the same committed measurements)."""
    if not name:
        return None
    found = [f for f in {frag for frag, _ in PEAKS} | set(UNKNOWN) | set(BANDWIDTH) if f in name]
    return max(found, key=len) if found else name


def bandwidth(name: str | None) -> float | None:
    """Memory bandwidth of the device `name` in bytes/s; None where not known."""
    if not name:
        return None
    return next((v for frag, v in BANDWIDTH.items() if frag in name), None)


def peak(name: str | None, precision: str) -> float | None:
    """Dense peak FLOP/s of the device `name` at `precision` ("fp32", "fp16", "bf16"); None where not known."""
    if not name or any(frag in name for frag in UNKNOWN):
        return None
    return next((v for (frag, p), v in PEAKS.items() if frag in name and p == precision), None)
