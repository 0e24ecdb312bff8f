"""The accelerators the harness knows, one row each: how a name is matched to it, its memory as sold, its dense peak
FLOP/s per precision and its memory bandwidth. Everything that asks about a device by name reads this table: the
memory rule (harness.devices.memory), the share of peak (the report and the operator cells), the estimate's
device factor and bookings (harness.estimate), and the docs' tables (harness.docs).

    match(name)            -> the row a name is of (a row's key, or a name as nvidia-smi, npu-smi or a booking gives
                              it), or None
    kind(name)             -> the device kind: names of one kind are one device to the estimate
    peak(name, precision)  -> dense FLOP/s;  bandwidth(name) -> bytes/s;  None where not published
    precision(amp)         -> the precision a cell computes in, from its AMP level

Matching: a row's key, else the longest of its name fragments found in the name, case-insensitively (so
"Ascend910B3" is a 910B, not a 910, and "NVIDIA H100 PCIe" an H100 PCIe, not an H100 SXM5). A name the table lacks
matches nothing: its kind is the name itself, and it has no peak, bandwidth or memory.

Rows: a row with memory (`gib`) is a size the memory table lists (harness.devices.memory.DEVICES: V100-16 ... 910B-64);
a variant whose peaks or bandwidth differ from its size's (V100S, A100 SXM4 80 GB and PCIe 80 GB, H100 PCIe, H200 NVL)
is a row of its own that is `sold` as that size; a row with neither is a family whose name does not say its memory
("Tesla V100", "NVIDIA H100 NVL"): its peaks and bandwidth are known, its memory is not.

Memory as sold: the vendors' "GB" of HBM is binary (an H200 "141 GB" showed 143,771 MiB to nvidia-smi); each size's
source is its row's.

Peaks (dense figures, no 2:4 sparsity; fp32 is the non-tensor-core FP32 rate, fp16/bf16 the tensor cores'):
- V100 SXM2: NVIDIA Tesla V100 datasheet, FP32 15.7 TFLOPS, tensor 125 TFLOPS (no bf16).
- A100 SXM: NVIDIA A100 datasheet, FP32 19.5 TFLOPS, FP16/BF16 tensor 312 TFLOPS.
- H100 SXM5: NVIDIA H100 datasheet, FP32 67 TFLOPS, FP16/BF16 tensor 989 TFLOPS (1,979 with sparsity);
  H100 PCIe: FP32 51 TFLOPS, FP16/BF16 756 TFLOPS.
- H200 SXM: NVIDIA H200 datasheet, FP32 67 TFLOPS, FP16/BF16 989 TFLOPS (1,979 with sparsity); H200 NVL: FP32
  60 TFLOPS, FP16/BF16 835 TFLOPS.
- Ascend 910: Huawei's launch figures (Hot Chips 2019), FP16 256 TFLOPS; no FP32 figure is published.
- Ascend 910B: Huawei publishes no per-chip dense figure in its product documentation; left unknown (the share is
  then null, and the table says no peak is known), rather than a relative's (the 910's).
PyTorch lets cuDNN use TF32 for fp32 convolutions by default on Ampere and later, so an fp32 cell's share of the FP32
peak can pass 100% there; the FP32 rate is still the limit an fp32 model is held to.

Memory bandwidth (bytes/s; the estimate's rule for a device no committed run measured, harness.estimate.devicescale):
- V100: NVIDIA Tesla V100 datasheet, 900 GB/s (SXM2 and PCIe); V100S PCIe: 1,134 GB/s.
- A100: NVIDIA A100 datasheet, 40 GB HBM2 1,555 GB/s; 80 GB HBM2e SXM 2,039 GB/s, PCIe 1,935 GB/s (an "A100-80"
  that does not say which takes the family's 1,555 GB/s, the lowest).
- H100: NVIDIA H100 datasheet, SXM5 3.35 TB/s, PCIe 2 TB/s.
- H200: NVIDIA H200 datasheet, SXM and NVL 4.8 TB/s.
- Ascend 910 and 910B: no figure found in a Huawei document checked here; left unknown (the rule then takes the
  peaks alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# -- precision ---------------------------------------------------------------------------------------------------
# A cell's precision from its AMP level: O1-O3 compute in half precision (fp16 on every platform the harness runs;
# bf16's peak is the same on these devices), AMP off in fp32. The one vocabulary: "fp32", "fp16" (and "bf16", a peak
# the tables give).
AMP_LEVELS = ("off", "O1", "O2", "O3")
PRECISIONS = ("fp32", "fp16", "bf16")

# The device-memory predictions' word for a precision (harness/devices/devicememory.json's entries, and the memory
# tables that print them): the half-precision trace is autocast's, bf16 on the CPU standing for a device's fp16.
TRACED = {"fp32": "fp32", "fp16": "amp"}


def precision(amp: str | None) -> str:
    """The precision a cell computes in, from its AMP level: "fp16" at O1, O2 and O3, else "fp32"."""
    return "fp16" if amp in AMP_LEVELS[1:] else "fp32"


# -- the table ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Device:
    name: str                    # the table's key: a memory size's (V100-16), a variant's or a family's (H100 PCIe)
    kind: str                    # names of one kind are one device to the estimate (figures, committed measurements)
    platform: str                # cuda | ascend
    names: tuple[str, ...]       # fragments of the names nvidia-smi, npu-smi and the bookings give it
    peaks: Mapping[str, float] = field(default_factory=dict, hash=False)   # precision -> dense FLOP/s
    bandwidth: float | None = None   # memory bandwidth, bytes/s; None: not published
    gib: float | None = None     # memory as sold, on a size's row
    source: str = ""             # where the memory figure comes from, on a size's row
    sold: str | None = None      # a variant's size: the row whose memory it has
    reported: str | None = None  # the name its tool reports, where a booking names the device by it


_V100 = {"fp32": 15.7e12, "fp16": 125e12}
_A100 = {"fp32": 19.5e12, "fp16": 312e12, "bf16": 312e12}
_H100 = {"fp32": 67e12, "fp16": 989e12, "bf16": 989e12}
_H100_PCIE = {"fp32": 51e12, "fp16": 756e12, "bf16": 756e12}
_H200 = {"fp32": 67e12, "fp16": 989e12, "bf16": 989e12}
_H200_NVL = {"fp32": 60e12, "fp16": 835e12, "bf16": 835e12}
_V100_SOLD = "NVIDIA Tesla V100 datasheet: 16 GB or 32 GB HBM2"
_A100_SOLD = "NVIDIA A100 datasheet: 40 GB HBM2 or 80 GB HBM2e"

DEVICES: tuple[Device, ...] = (
    Device("V100-16", "V100", "cuda", ("V100-SXM2-16GB", "V100-PCIE-16GB", "V100-16"), _V100, 900e9, 16, _V100_SOLD),
    Device("V100-32", "V100", "cuda", ("V100-SXM2-32GB", "V100-PCIE-32GB", "V100-32"), _V100, 900e9, 32, _V100_SOLD,
           reported="Tesla V100-SXM2-32GB"),
    Device("V100S", "V100S", "cuda", ("V100S",), _V100, 1134e9, sold="V100-32"),
    Device("V100", "V100", "cuda", ("V100",), _V100, 900e9),
    Device("A100-40", "A100", "cuda", ("A100-SXM4-40GB", "A100-PCIE-40GB", "A100-40"), _A100, 1555e9, 40, _A100_SOLD),
    Device("A100-80", "A100", "cuda", ("A100 80GB", "A100-80"), _A100, 1555e9, 80, _A100_SOLD),
    Device("A100-SXM4-80GB", "A100-SXM4-80GB", "cuda", ("A100-SXM4-80GB",), _A100, 2039e9, sold="A100-80"),
    Device("A100 80GB PCIe", "A100 80GB PCIe", "cuda", ("A100 80GB PCIe",), _A100, 1935e9, sold="A100-80"),
    Device("A100", "A100", "cuda", ("A100",), _A100, 1555e9),
    Device("H100-80", "H100", "cuda", ("H100 80GB", "H100-80"), _H100, 3.35e12, 80,
           "NVIDIA H100 datasheet: 80 GB (SXM5, PCIe)", reported="NVIDIA H100 80GB HBM3"),
    Device("H100 PCIe", "H100 PCIe", "cuda", ("H100 PCIe",), _H100_PCIE, 2.0e12, sold="H100-80"),
    Device("H100", "H100", "cuda", ("H100",), _H100, 3.35e12),
    Device("H200-141", "H200", "cuda", ("H200", "H200-141"), _H200, 4.8e12, 141, "NVIDIA H200 datasheet: 141 GB HBM3e",
           reported="NVIDIA H200"),
    Device("H200 NVL", "H200 NVL", "cuda", ("H200 NVL",), _H200_NVL, 4.8e12, sold="H200-141"),
    Device("910-32", "Ascend910", "ascend", ("Ascend910", "910-32"), {"fp16": 256e12}, None, 32,
           "the study's host (8x Ascend 910, 32 GB); Huawei Atlas 300T training card (model 9000): 32 GB HBM",
           reported="Ascend910"),
    Device("910B-64", "Ascend910B", "ascend", ("Ascend910B", "910B-64"), {}, None, 64,
           "Huawei Atlas 800T A2: Ascend 910B1-B3 with 64 GB HBM each (the 910B4 has 32 GB)", reported="Ascend910B"),
)
CATALOG: dict[str, Device] = {d.name: d for d in DEVICES}


def match(name: str | None) -> Device | None:
    """The row a name is of: a row's key, else the row with the longest fragment found in the name (case-insensitive;
    of two as long, the first in the table); None for a name the table lacks."""
    if not name:
        return None
    if name in CATALOG:
        return CATALOG[name]
    low = name.lower()
    found = [(len(f), -i, d) for i, d in enumerate(DEVICES) for f in d.names if f.lower() in low]
    return max(found, key=lambda h: h[:2])[2] if found else None


def kind(name: str | None) -> str | None:
    """The device kind of a name ("NVIDIA H100 80GB HBM3" -> "H100", "Ascend910B3" -> "Ascend910B"), else the name
    itself (a CPU's model); None for none."""
    if not name:
        return None
    d = match(name)
    return d.kind if d else name


def peak(name: str | None, precision: str) -> float | None:
    """Dense peak FLOP/s of the device `name` at `precision` ("fp32", "fp16", "bf16"); None where not known."""
    d = match(name)
    return d.peaks.get(precision) if d else None


def bandwidth(name: str | None) -> float | None:
    """Memory bandwidth of the device `name` in bytes/s; None where not known."""
    d = match(name)
    return d.bandwidth if d else None


def sized(name: str | None) -> Device | None:
    """The size (a row with memory) a name is of: its own row, or the one a variant is sold as; None for a name the
    table lacks or one that does not say its memory ("Tesla V100")."""
    d = match(name)
    if d is not None and d.sold:
        d = CATALOG[d.sold]
    return d if d is not None and d.gib is not None else None


def sizes() -> dict[str, Device]:
    """The rows with memory, in the table's order: the memory table."""
    return {d.name: d for d in DEVICES if d.gib is not None}


def booking(name: str, devices: int = 1) -> tuple[str, str, int]:
    """(platform, the name its tool reports, devices) of a host of `devices` of the row `name`: how the estimate's
    bookings and the docs' hosts name a device."""
    d = CATALOG[name]
    return d.platform, d.reported or d.name, devices

