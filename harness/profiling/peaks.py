"""Dense peak FLOP/s per accelerator and precision, for the share of the device's limit a cell reaches (the model
cells' `share of peak` in Table I and the operator cells' `percent_of_peak`), and the device a cell ran on.
 The figures, their sources and how a device's name is matched to them are harness.devices.catalog's (one table for
the memory rule, the peaks and the estimate); the device's tools are read in harness.devices.query. This module keeps
the names the profiling, the report and the operator cells read:

    peak(name, precision), bandwidth(name), kind(name)   harness.devices.catalog
    device_name(platform), run_device(platform, env)     harness.devices.query
"""

from __future__ import annotations

from harness.devices import catalog
from harness.devices.catalog import bandwidth, kind, peak
from harness.devices.query import device_name, run_device

__all__ = ["PEAKS", "bandwidth", "device_name", "kind", "peak", "run_device"]

# (device kind, precision) -> FLOP/s: the catalog's peaks, by kind.
PEAKS: dict[tuple[str, str], float] = {(d.kind, p): v for d in catalog.DEVICES for p, v in d.peaks.items()}
