"""What a person sees during a run: cells done / total with the elapsed time and an estimate of what is left,
a line per epoch of a long cell (epoch, loss, metric, throughput, read from its event log as it grows). A download's
progress is harness.data.fetch's (standard library only: it runs before any framework)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.config.spec import ModelSpec
from harness.results import eventlog
from harness.results.units import duration

EPOCH_LINE_EVERY_S = 10.0    # at most one epoch line per this many seconds: long cells only, never a flood


class RunProgress:
    """Cells done / total, elapsed, and what is left. With `planned` (each planned run's estimated seconds, in run
    order: harness.estimate.runtime.before_run) what is left is the estimate of the runs to come, corrected by how the
    runs so far compared with their own estimates (a host twice as slow as the reference doubles it); without it, the
    mean time of the runs measured so far times the runs left."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic, planned: list[float] | None = None):
        self.total, self.clock, self.t0 = total, clock, clock()
        self.done, self.measured_s, self.measured = 0, 0.0, 0
        self.planned = list(planned) if planned is not None and len(planned) == total else None
        self.estimated_s = 0.0   # the estimates of the runs measured so far

    def finished(self, seconds: float | None = None) -> str:
        """Count a cell as done (`seconds`: how long it ran, None for one kept or skipped) and say where the run is."""
        self.done += 1
        if seconds is not None:
            self.measured += 1
            self.measured_s += seconds
            if self.planned is not None and self.done <= len(self.planned):
                self.estimated_s += self.planned[self.done - 1]
        left = self.total - self.done
        line = f"{self.done}/{self.total} cells, {duration(self.clock() - self.t0)} elapsed"
        if left and self.planned is not None and self.done <= len(self.planned):
            rest = sum(self.planned[self.done:])
            pace = self.measured_s / self.estimated_s if self.measured and self.estimated_s > 0 else 1.0
            line += f", about {duration(rest * pace)} left by the estimate"
            if self.measured and self.estimated_s > 0:
                line += f" (runs so far took {pace:.2f}x theirs)"
        elif left and self.measured:
            line += f", about {duration(left * self.measured_s / self.measured)} left"
        return line


class EpochLines:
    """Turns a training cell's event-log lines into readable epoch lines, at most one per EPOCH_LINE_EVERY_S."""

    def __init__(self, spec: ModelSpec, log: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 every_s: float = EPOCH_LINE_EVERY_S):
        self.spec, self.log, self.clock, self.every_s = spec, log, clock, every_s
        self.last = clock()
        self.epoch: dict[str, Any] = {}

    def __call__(self, line: str) -> None:
        ev = eventlog.parse_line(line)
        if ev is None:
            return
        if ev["key"] == eventlog.EPOCH_STOP:
            self.epoch = ev.get("metadata") or {}
        elif ev["key"] == eventlog.EVAL_ACCURACY and self.epoch and self.clock() - self.last >= self.every_s:
            self.last = self.clock()
            m = self.epoch
            tput = m["samples"] / m["train_s"] if m.get("train_s") else None
            epochs = self.spec.epochs
            part = f" part {m['part'] + 1}/{m['parts']}" if "part" in m else ""
            self.log(f"    epoch {m.get('epoch_num', 0) + 1}{f'/{epochs}' if epochs else ''}{part}: "
                     f"loss {m.get('loss', float('nan')):.4f}, {self.spec.metric} {ev['value']:.4f}"
                     + (f", {tput:,.1f} {self.spec.throughput_unit}" if tput else ""))
