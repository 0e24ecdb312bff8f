"""The host side of every cell: the process's resident memory and CPU time (psutil), and CPU package
energy from RAPL (`/sys/class/powercap/intel-rapl:N/energy_uj`) where the kernel lets this user read it.
 RAPL: the top-level `package-N` zones are summed (cores + uncore of every socket; DRAM and the `psys`
platform zone are left out, psys because it contains the packages). It is the whole host's CPU energy,
every process's, not this cell's alone. Each zone's counter wraps at its `max_energy_range_uj`; a
sample every 100 ms sees at most one wrap (it takes minutes at full power), which is added back. Since
Linux 5.10 `energy_uj` is readable by root only (CVE-2020-8694); unreadable means no CPU energy
(null in the result), never 0.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any

from harness.telemetry.sampler import Source, SourceUnavailable

RAPL_ROOT = Path("/sys/class/powercap")


class Rapl:
    """Cumulative energy, in joules since `open`, of the CPU packages, with counter wraparound handled."""

    def __init__(self, zones: list[tuple[str, Path, int]]):
        self.zones = zones                                     # (name, energy_uj path, max_energy_range_uj)
        self._last = [self._raw(p) for _, p, _ in zones]
        self._total_uj = 0

    @staticmethod
    def _raw(path: Path) -> int:
        with open(path) as f:
            return int(f.read())

    @classmethod
    def open(cls, root: Path = RAPL_ROOT) -> tuple[Rapl | None, str | None]:
        """(Rapl, None), or (None, why not)."""
        zones = []
        try:
            candidates = sorted(p for p in root.iterdir() if p.name.count(":") == 1 and "rapl" in p.name)
        except OSError:
            return None, f"no {root} (no powercap driver, or not visible in this container)"
        for zone in candidates:
            try:
                name = (zone / "name").read_text().strip()
            except OSError:
                continue
            if not name.startswith("package"):
                continue
            try:
                max_range = int((zone / "max_energy_range_uj").read_text())
                cls._raw(zone / "energy_uj")
            except (OSError, ValueError) as e:
                return None, (f"{zone / 'energy_uj'} is not readable ({type(e).__name__}: {e}); since Linux 5.10 "
                              f"root only")
            zones.append((name, zone / "energy_uj", max_range))
        if not zones:
            return None, f"no RAPL package zone under {root}"
        return cls(zones), None

    def read_j(self) -> float:
        for i, (_, path, max_range) in enumerate(self.zones):
            raw = self._raw(path)
            delta = raw - self._last[i]
            if delta < 0:  # the counter wrapped past max_energy_range_uj back to 0
                delta += max_range
            self._total_uj += delta
            self._last[i] = raw
        return self._total_uj / 1e6


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def rss_high_water_mb() -> float | None:
    """The kernel's own peak resident set of this process (VmHWM): exact, not sampled."""
    try:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):
        return None
    return kb / 1024 / (1024 if sys.platform == "darwin" else 1)  # macOS reports bytes, Linux KiB


def children_high_water_mb() -> float | None:
    """Peak RSS of the largest child process this one has waited for; None when it started none."""
    try:
        kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    except (OSError, ValueError):
        return None
    return kb / 1024 / (1024 if sys.platform == "darwin" else 1) if kb else None


class CpuSource(Source):
    """rss_mb (gauge), cpu_s (this process's user+system CPU seconds, a counter) and, with RAPL,
    energy_j (a counter of the CPU packages' energy)."""

    name = "psutil"
    scope = "host"

    def __init__(self, pid: int | None = None, rapl_root: Path = RAPL_ROOT, use_rapl: bool = True):
        self.pid = pid
        self.rapl_root = rapl_root
        self.use_rapl = use_rapl
        self.rapl: Rapl | None = None
        self.rapl_unavailable: str | None = None
        self.cpus = usable_cpus()

    def open(self) -> None:
        try:
            import psutil
        except ImportError:
            raise SourceUnavailable("psutil is not installed") from None
        self._proc = psutil.Process(self.pid)
        if self.use_rapl:
            self.rapl, self.rapl_unavailable = Rapl.open(self.rapl_root)
        else:
            self.rapl_unavailable = "RAPL not used"

    def read(self) -> dict[str, Any]:
        cpu = self._proc.cpu_times()
        out = {"rss_mb": self._proc.memory_info().rss / 2**20, "cpu_s": cpu.user + cpu.system}
        if self.rapl is not None:
            out["energy_j"] = self.rapl.read_j()
        return out

    def info(self) -> dict[str, Any]:
        own = self.pid in (None, os.getpid())
        return {"cpus": self.cpus, "rapl": [z[0] for z in self.rapl.zones] if self.rapl else None,
                "rapl_unavailable": self.rapl_unavailable,
                "rss_high_water_mb": rss_high_water_mb() if own else None,
                "children_rss_high_water_mb": children_high_water_mb() if own else None}
