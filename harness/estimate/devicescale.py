"""How many times longer a training step takes on one device than on the device a committed cell was measured on: the
estimate's device factor (harness.estimate.stepmodel), said in its output with what it rests on.

1. The same device kind (harness.devices.catalog.kind: an "NVIDIA H200" is an "H200"): 1, the cell's own times.
2. Measured: where both devices have a committed run of the same benchmark at the accelerator profile's sizes
   (MEASURED: benchmarks/reference_gap.py --preset accelerator, one file per device), the ratio of the two devices'
   steady throughputs of the model's reference loop at the precision. The reference loops, not the harness's own
   cells: a reference loop is the same program in both runs (the harness's BERT changed its attention between the
   H200's run and the H100's, docs/methodology/at-best.md), and it is the yardstick the project reads a card by. A
   measured factor scales the whole step: the host's part was measured with it.
3. Else the stated rule: the slower of the two devices' dense-peak ratio at the precision (fp16's where one publishes
   no figure at it: the Ascend 910 has no FP32 figure) and their memory-bandwidth ratio (vendor figures,
   harness.devices.catalog), scaling the device's part of a step (its busy share); the peaks alone where a bandwidth
   is not published. A factor from vendor figures is a bound on the device, not a measurement of the step.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from harness.devices import catalog
from harness.devices.catalog import bandwidth, kind, peak
from harness.paths import REPO

# (the device, a key of harness.devices.catalog, the committed reference_gap.py --preset accelerator run made on it):
# each file's device is stated in docs/methodology/at-best.md (the files record the host's CPU, not its GPU).
MEASURED = (("H200-141", "docs/at-best/reference_gap-h200-2026-11-26.json"),
            ("H100-80", "docs/at-best/reference_gap-h100-2026-11-27.json"))


@dataclass(frozen=True)
class Scale:
    factor: float
    whole_step: bool   # a measured factor: the step's host part moves with it
    how: str           # same | measured | peak | bandwidth | none


@functools.cache
def throughputs(device: str | None) -> dict[tuple[str, str], float]:
    """(model, precision) -> the reference loop's steady throughput on the device's kind, from its MEASURED file; {}
    where none is committed."""
    files = [REPO / f for name, f in MEASURED if kind(name) == kind(device)]
    out: dict[tuple[str, str], float] = {}
    for f in files:
        for row in json.loads(f.read_text()).get("rows", []):
            if row.get("status") == "ok" and row.get("reference"):
                out[row["model"], catalog.precision(row.get("amp"))] = float(row["reference"])
    return out


def measured_files(device: str | None) -> list[str]:
    return [f for name, f in MEASURED if kind(name) == kind(device)]


def peak_ratio(ref: str | None, here: str | None, precision: str) -> float | None:
    """How many times faster `ref` is than `here` by their dense peaks at the precision, else at fp16 where one of
    them publishes no figure at the precision; None where not known."""
    for p in (precision, "fp16"):
        a, b = peak(ref, p), peak(here, p)
        if a and b:
            return a / b
    return None


def bandwidth_ratio(ref: str | None, here: str | None) -> float | None:
    a, b = bandwidth(ref), bandwidth(here)
    return a / b if a and b else None


def scale(ref: str | None, here: str | None, model: str | None, precision: str) -> Scale:
    """The factor for a step measured on `ref` run on `here` (None: unknown or a CPU: unscaled)."""
    if not ref or not here:
        return Scale(1.0, False, "none")
    if kind(ref) == kind(here):
        return Scale(1.0, False, "same")
    a, b = throughputs(ref).get((model or "", precision)), throughputs(here).get((model or "", precision))
    if a and b:
        return Scale(a / b, True, "measured")
    p, bw = peak_ratio(ref, here, precision), bandwidth_ratio(ref, here)
    if p and bw:
        return Scale(max(p, bw), False, "bandwidth" if bw > p else "peak")
    if p or bw:
        return Scale(p or bw, False, "peak" if p else "bandwidth")
    return Scale(1.0, False, "none")


def short(used: dict[tuple[str, str], Scale]) -> str:
    """The device factor in a few words, for a table: which models it measured and which a rule scaled."""
    by: dict[str, dict[str, set[str]]] = {}   # how -> model -> its precisions
    for (model, precision), s in used.items():
        if s.how not in ("same", "none"):
            by.setdefault(s.how, {}).setdefault(model, set()).add(precision)
    said = {"measured": "measured (both cards' reference loops)", "peak": "rule, dense peaks",
            "bandwidth": "rule, memory bandwidth"}
    out = []
    for how in ("measured", "bandwidth", "peak"):
        groups: dict[tuple[str, ...], list[str]] = {}
        for model, precisions in by.get(how, {}).items():
            groups.setdefault(tuple(sorted(precisions)), []).append(model)
        for precisions, models in sorted(groups.items()):
            every = len(models) == len({m for m, _ in used})
            out.append(f"{said[how]} ({', '.join(precisions)}): {'all' if every else ', '.join(sorted(models))}")
    return "; ".join(out) or "not scaled"


def basis(ref: str | None, here: str | None, used: dict[tuple[str, str], Scale]) -> str:
    """The output's line on the device factor: `used` is (model, precision) -> the Scale its cells took."""
    if not ref or not here or kind(ref) == kind(here):
        return f"on the device the runs measured ({ref or 'the reference host'}): not scaled"
    measured = {k: s for k, s in used.items() if s.how == "measured"}
    ruled = {k: s for k, s in used.items() if s.how in ("peak", "bandwidth")}
    parts = []
    if measured:
        parts.append(f"from the two devices' own measurements of the same reference loops ("
                     f"{', '.join(measured_files(ref) + measured_files(here))}; one round each): "
                     + ", ".join(f"{m} {p} {s.factor:.2f}x" for (m, p), s in sorted(measured.items()))
                     + " (the whole step)")
    if ruled:
        peaks = [f"{p:.2f}x at {prec}" + ("" if peak(ref, prec) and peak(here, prec) else " (fp16's: no figure at it)")
                 for prec in ("fp32", "fp16") if (p := peak_ratio(ref, here, prec))]
        bw = bandwidth_ratio(ref, here)
        rule = (f"dense peaks {', '.join(peaks)}" if peaks else "no peak known") + (
            f", memory bandwidth {bw:.2f}x" if bw else f", no bandwidth published for {here}")
        parts.append("by the stated rule, the slower of the dense-peak and the memory-bandwidth ratio (vendor "
                     f"figures, harness/devices/catalog.py: {rule}), on the device's part of a step: "
                     + ", ".join(f"{m} {p} {s.factor:.2f}x ({s.how})" for (m, p), s in sorted(ruled.items())))
    if not parts:
        return f"from {ref} to {here}: nothing scaled"
    return f"scaled from {ref} to {here} " + "; ".join(parts)
