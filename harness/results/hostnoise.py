"""What the host was doing while a sweep's operator turn groups ran, read from the groups themselves, and what a
configuration's ratio makes of it (harness.results.measure.OpConfig). Before every block a process reads a 4 MiB buffer
once and keeps the time (`probe_s`, harness.scenarios.operator.turns.Probe): the host's memory at that moment.

    group_probe(a, b)   a group's probe: the mean over its two processes' probes (None where they kept none)
    HostNoise.of(groups) from every turn group of a run (one host's), per MindSpore mode:
        probe_limit_s   CONTENDED x the run's quiet probe (QUIET: the 25th percentile of its group probes): a group
                        whose probe is above it was taken in a contended stretch and is left out of its
                        configuration's ratio (kept(), left_out())
        spread          the run's spread between groups: the median over its configurations of each one's spread
                        (the sd of its kept groups' log ratios): the least spread a configuration's interval assumes
                        (harness.results.measure.paired_replicates' floor)

Why (docs/methodology/operators.md, item 16, measured on the 2-core machine):
- contended stretches: in them the 4 MiB read took 210-290 us against 170-190 us, and MindSpore's blocks ran up to
  1.5x slower, PyTorch's much less, so the groups taken then gave ratios 10-30% below their configuration's others.
  Left out (the precision rule then asks for a group in their place, and the report counts them), a run that met
  such a stretch for a minute still gave 12 of 12 ratios within ±5%;
- the spread's floor: a configuration's own spread, from three groups, has two degrees of freedom, and the precision
  rule stops at the first narrow interval, so it stopped on the groups that agreed by chance: two quick runs in a row
  had 8 of 12 ratios inside each other's interval. With the run's spread as the least a configuration's interval
  assumes (and the configurations' groups spread over the sweep, harness.config.matrix.schedule), the next two: 12 of
  12.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

# A group whose probe is over this many times the run's quiet probe was taken in a contended stretch. The quiet
# level is the 25th percentile of the run's group probes, not their median: on the 2-core machine a third of a run's
# groups could meet contended stretches, and the median moved up with them. A group's probe is the mean of its
# processes' probes, not their median: a stretch that starts or ends within a group shows in its mean. Read again on
# twelve quick runs and sweeps, against the median over the median: as many ratios within ±5% in nine, more in two
# (one and four), one fewer in one (docs/methodology/operators.md, item 16).
CONTENDED = 1.15
QUIET = 25


def group_probe(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The probe of a group's pair of processes (two results): the mean over both processes' probes."""
    probes = [float(p) for r in (a, b) for p in (r.get("probe_s") or [])]
    return float(np.mean(probes)) if probes else None


@dataclass(frozen=True)
class Group:
    """One turn group of a configuration at one MindSpore mode: its 2 x rounds block times (MindSpore's, then
    PyTorch's), the log of its MindSpore/PyTorch throughput ratio (harness.results.measure.group_log_ratios) and its
    probe."""

    blocks: np.ndarray
    log_ratio: float
    probe_s: float | None


@dataclass(frozen=True)
class HostNoise:
    """One run's (one host's) noise: the probe over which a group was taken in a contended stretch, and per
    MindSpore mode the spread between groups a configuration's interval assumes at least. The default leaves nothing
    out and assumes no spread (a configuration read on its own)."""

    probe_limit_s: float | None = None
    spread: dict[str, float] = field(default_factory=dict)   # MindSpore mode -> sd of the groups' log ratios

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
        limit = CONTENDED * float(np.percentile(probes, QUIET)) if probes else None
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
