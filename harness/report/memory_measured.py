"""The report's table "device memory: predicted vs measured": each training cell of an accelerator run, the peak the
CPU-side trace predicts for it (harness.devices.memory, made at the accelerator profile's sizes) beside what the run
measured: the framework's own peaks (allocated: max_memory_allocated, the results' framework_peak_memory_mb;
reserved: max_memory_reserved, framework_reserved_memory_mb, what its caching allocator held from the device) and
the device's as NVML or npu-smi sampled it (peak_device_memory_mb: every process on the device, the CUDA or CANN
context included). A CPU run has no device memory to measure: its host is named as not measured. A cell that ran at
other sizes than the prediction's, or took its batch in micro-batches, is listed without a ratio.

    table(hosts, merged) -> {"rows": [...], "cpu": [host labels]}   (harness.report.build.merge's hosts and results)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config.cell import Cell
from harness.devices import memory as devicememory
from harness.results.store import RunStore

TRAINS = ("model", "scaling")
MEASURED = (("allocated", "framework_peak_memory_mb"), ("reserved", "framework_reserved_memory_mb"),
            ("device", "peak_device_memory_mb"))


def _size(cell: Cell) -> str:
    hp = cell.spec.hparams
    return " x ".join(str(hp[k]) for k in ("batch", "max_len") if hp.get(k)) or "whole graph"


def _predicted_size(model: str | None) -> str | None:
    entry = devicememory.load().get("models", {}).get(model or "")
    if not entry:
        return None
    return " x ".join(str(v) for v in (entry.get("batch"), entry.get("sequence")) if v) or "whole graph"


def _peak(results: Sequence[dict[str, Any]], key: str) -> float | None:
    """The largest a cell's ok repeats measured, in GiB (a peak is what the device had to hold)."""
    got = [r[key] for r in results if isinstance(r.get(key), int | float)]
    return max(got) / 1024 if got else None


def _row(cell: Cell, results: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    need = devicememory.need(cell)
    at = _predicted_size(cell.model)
    note = None
    if need is None:
        note = "no prediction for this model (harness/devices/devicememory.json)"
    elif at != _size(cell):
        note = f"ran at {_size(cell)}, predicted at {at}: not compared"
    elif steps > 1:
        note = f"its batch in {steps} micro-batches; the prediction is of the whole batch: not compared"
    measured = {name: _peak(results, key) for name, key in MEASURED}
    compared = need is not None and note is None
    return {"model": cell.model, "precision": devicememory.precision(cell.amp), "framework": cell.framework,
            "mode": cell.mode, "devices": cell.devices, "size": _size(cell),
            "predicted_gib": need.gib if need else None, "basis": need.basis if need else None, **measured,
            "ratio": measured["allocated"] / need.gib if compared and measured["allocated"] else None,
            "measured": any(v is not None for v in measured.values()), "note": note}


def table(hosts: Sequence[dict[str, Any]], merged: Sequence[tuple[str, Path, dict[str, Any]]]) -> dict[str, Any]:
    """Per accelerator host, a row for each of its training cells that finished ok; the CPU hosts' labels apart."""
    cpu = [h["label"] for h in hosts if h["meta"].get("platform") == "cpu"]
    cells: dict[tuple[str, str], tuple[Cell, int, list[dict[str, Any]]]] = {}
    for label, run, r in merged:
        if label in cpu or r.get("kind") not in TRAINS or r.get("status") != "ok":
            continue
        key = (label, r["cell"])
        if key not in cells:
            spec = RunStore(run).read_spec(r["cell"], r.get("repeat", 0)) or {}
            if not isinstance(spec.get("cell"), dict):
                continue   # no spec file: its sizes are not known, so neither is its prediction
            cells[key] = (Cell.from_dict(spec["cell"]), int(spec.get("accumulation_steps") or 1), [])
        cells[key][2].append(r)
    rows = [{"host": label, **_row(cell, results, steps)} for (label, _), (cell, steps, results) in cells.items()]
    rows.sort(key=lambda r: (r["host"], r["model"] or "", r["precision"], r["framework"], r["mode"], r["devices"]))
    return {"rows": rows, "cpu": cpu}
