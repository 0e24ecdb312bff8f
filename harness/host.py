"""What a host can run: the one object asked, for every cell, whether it runs here, and if not, why.

A cell is recorded as `skipped`, with the reason, instead of running when (first match wins, in this order):
- a [[skip]] rule of the matrix names it on this platform in the run's profile (harness/matrix.toml); the rule sees a
  multi-node cell's devices of one node: a host's limits are per host;
- this Python lacks a module its framework needs on the platform (harness.platforms.missing_framework: only absence
  counts, a framework that is installed but fails to import still runs, and fails, in its cell);
- it needs more devices on each host than the host shows (not on cpu, where a cell's processes share the CPU).

The runner asks before every cell, `harness list --platform` for every line it prints, and `--resume` keeps a skipped
result only while its reason is the one asked now: asking one object is what keeps the three in agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness import platforms
from harness.cell import Cell
from harness.matrix import Matrix


@dataclass(frozen=True)
class Host:
    platform: str
    profile: str | None
    devices: int                  # the devices the platform shows (harness.platforms.visible_devices); 1 on cpu
    missing: Mapping[str, str]    # framework -> why this Python cannot run its cells on the platform
    matrix: Matrix = field(repr=False)   # whose [[skip]] rules apply

    @classmethod
    def probe(cls, matrix: Matrix, platform: str, profile: str | None, devices: int | None = None) -> Host:
        """This host as it is now: `devices` where the caller has counted them already (the runner, through
        platforms.require), else counted here; every framework's modules looked up, none imported."""
        if devices is None:
            devices = platforms.visible_devices(platform)
        missing = {fw: why for fw in platforms.FRAMEWORK_MODULES
                   if (why := platforms.missing_framework(fw, platform)) is not None}
        return cls(platform, profile, devices, missing, matrix)

    def verdict(self, cell: Cell) -> str | None:
        """Why the cell cannot run on this host (the reason its skipped result records), or None where it can."""
        return self._rule(cell) or self.missing.get(cell.framework) or self._too_few_devices(cell)

    def _rule(self, cell: Cell) -> str | None:
        values: dict[str, Any] = {**cell.axes(), "devices": cell.devices_per_node, "platform": self.platform,
                                  "profile": self.profile}
        return self.matrix.skip_rule(values)

    def _too_few_devices(self, cell: Cell) -> str | None:
        if self.platform != "cpu" and cell.devices_per_node > self.devices:
            return f"needs {cell.devices_per_node} devices on each host, the host shows {self.devices}"
        return None
