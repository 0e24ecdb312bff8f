"""What the host was doing while a sweep's operator turn groups ran, read from the groups themselves, and what a
configuration's ratio makes of it (harness.measure.OpConfig). Before every block a process reads a 4 MiB buffer
once and keeps the time (`probe_s`, harness.turns.Probe): the host's memory at that moment.

    group_probe(a, b)   a group's probe: the median over its two processes' probes (None where they kept none)
    HostNoise.of(groups) from every turn group of a run (one host's), per MindSpore mode:
        probe_limit_s   CONTENDED x the median group probe: a group whose probe is above it was taken in a
                        contended stretch and is left out of its configuration's ratio (kept(), left_out())
        spread          the run's spread between groups: the median over its configurations of each one's spread
                        (the sd of its kept groups' log ratios): the least spread a configuration's interval assumes
                        (harness.measure.paired_replicates' floor)

Why (docs/methodology/operators.md, item 16, measured on the 2-core machine):
- contended stretches: in them the 4 MiB read took 217-277 us against 170-190 us, and MindSpore's blocks ran up to
  1.5x slower, PyTorch's much less, so the groups taken then gave ratios 10-20% below the run's others. Left out
  (the precision rule then asks for a group in their place, and the report counts them), the largest difference
  between neighbouring quick runs fell from 12.4-12.7% to 4.0-4.3%;
- the spread's floor: a configuration's own spread, from three groups, has two degrees of freedom, and the precision
  rule stops at the first narrow interval, so it stopped on the groups that agreed by chance: two quick runs in a row
  had 7-9 of 12 ratios inside each other's interval. The groups of one host share its noise; with the spread
  pooled over the run as the least a configuration's interval assumes, 9-11 of 12 (read again, on eight runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

# A group whose probe is over this many times the run's median group probe was taken in a contended stretch. The
# quiet runs' groups lay within 1.1x of their median but for 0-3 of 36-39; the contended stretch's at 1.2-1.5x.
CONTENDED = 1.15


def group_probe(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The probe of a group's pair of processes (two results): the median over both processes' probes."""
    probes = [float(p) for r in (a, b) for p in (r.get("probe_s") or [])]
    return median(probes) if probes else None


@dataclass(frozen=True)
class Group:
    """One turn group of a configuration at one MindSpore mode: its 2 x rounds block times (MindSpore's, then
    PyTorch's), the log of its MindSpore/PyTorch throughput ratio (harness.measure.group_log_ratios) and its probe."""

    key: str
    blocks: np.ndarray
    log_ratio: float
    probe_s: float | None


@dataclass(frozen=True)
class HostNoise:
    probe_limit_s: float | None = None
    spread: dict[str, float] = field(default_factory=dict)   # MindSpore mode -> pooled sd of the log ratios

    def contended(self, g: Group) -> bool:
        return self.probe_limit_s is not None and g.probe_s is not None and g.probe_s > self.probe_limit_s

    def kept(self, groups: list[Group]) -> list[Group]:
        """The groups a ratio is taken over: those not taken in a contended stretch; all of them where every one was
        (a configuration is never left without a ratio by the rule)."""
        quiet = [g for g in groups if not self.contended(g)]
        return quiet or groups

    def left_out(self, groups: list[Group]) -> int:
        return len(groups) - len(self.kept(groups))

    @classmethod
    def of(cls, by_mode: dict[str, Iterable[list[Group]]]) -> HostNoise:
        """From one run's (one host's) groups: per MindSpore mode, per configuration, its groups."""
        modes = {m: [list(gs) for gs in configs] for m, configs in by_mode.items()}
        probes = [g.probe_s for configs in modes.values() for gs in configs for g in gs if g.probe_s is not None]
        limit = CONTENDED * median(probes) if probes else None
        gate = cls(limit)
        spread = {}
        for mode, configs in modes.items():
            # each configuration's own spread over the groups kept, where it has two or more; their median, so that
            # one configuration whose groups met a stretch the gate did not catch does not set every other's floor
            own = [float(np.std([g.log_ratio for g in kept], ddof=1))
                   for gs in configs if len(kept := gate.kept(gs)) >= 2]
            if own:
                spread[mode] = median(own)
        return cls(limit, spread)
