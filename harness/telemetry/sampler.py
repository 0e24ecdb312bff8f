"""The sampler: one daemon thread per source, in the cell's own process, at a fixed interval.

Why a thread and not a separate process: one host sample (psutil RSS and CPU time, each one read of
/proc/self; RAPL, one sysfs read per CPU package) costs tens of microseconds of Python, and an NVML
query is a ctypes call that releases the GIL while the driver answers. At the default 10 Hz that is
well below 0.1% of one core, and the training thread is only ever held up for the sample's own few
microseconds of interpreter time. A sampling process would cost a second interpreter (tens of MB of
RSS, its own start-up), could not see the framework's own counters, and would have to be found and
ended if the cell died; a daemon thread dies with the cell and always stops with it.
`benchmarks/telemetry_overhead.py` measures the throughput with and without it.

A source's slow call (npu-smi runs a program) only delays that source's own thread.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

MAX_CONSECUTIVE_ERRORS = 5  # a source that keeps failing stops being polled (its error is recorded)


class SourceUnavailable(Exception):
    """A source that cannot measure on this host (module missing, tool absent, file unreadable)."""


class Source:
    """One kind of measurement. `read()` returns {field: value or None}; fields whose name ends in
    `_j` or `_s` are cumulative counters (energy, CPU seconds), the others instantaneous gauges."""

    name = "source"
    scope: str | None = None        # what its energy covers: "device" or "host"
    min_interval_s = 0.0            # never polled faster than this, whatever the sampler's interval

    def open(self) -> None:
        """Check the source works here; raise SourceUnavailable(reason) if it cannot."""

    def read(self) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def info(self) -> dict[str, Any]:
        """What describes the measurement (device name, peaks the OS kept), read after the last sample."""
        return {}


class _Poller:
    def __init__(self, source: Source, interval_s: float, clock):
        self.source = source
        self.interval_s = max(interval_s, source.min_interval_s)
        self.clock = clock
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self.errors = 0
        self.last_error: str | None = None
        self.gave_up = False
        self._consecutive = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"telemetry-{source.name}", daemon=True)

    def sample(self) -> None:
        with self._lock:
            t0 = self.clock()
            try:
                values = self.source.read()
            except Exception as e:  # noqa: BLE001 - a failed sample is counted and recorded, never fatal to the cell
                self.errors += 1
                self._consecutive += 1
                self.last_error = f"{type(e).__name__}: {e}"[:300]
                if self._consecutive >= MAX_CONSECUTIVE_ERRORS:
                    self.gave_up = True
                return
            self._consecutive = 0
            # The middle of the call: what a slow source (npu-smi) reports is from somewhere inside it.
            self.samples.append(((t0 + self.clock()) / 2, values))

    def _loop(self) -> None:
        # Linux: this thread runs only when a core would otherwise idle (SCHED_IDLE), so its wake-ups never preempt
        # the training threads: with OpenMP using every core, one preempted worker holds up the whole parallel op.
        # A sample may then come a little late on a saturated host; each carries its own timestamp.
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # 0: the calling thread
        except (AttributeError, OSError):
            pass  # not Linux, or not allowed: sample at normal priority
        due = self.clock() + self.interval_s
        while not self.gave_up and not self._stop.wait(max(0.0, due - self.clock())):
            self.sample()
            due += self.interval_s
            now = self.clock()
            if due < now:  # fell behind (a slow call): skip the missed ticks rather than burst
                due = now + self.interval_s

    def start(self) -> None:
        self.sample()  # the first sample before the cell's work: the baseline
        self._thread.start()

    def stop(self, join_timeout_s: float) -> None:
        self._stop.set()
        self._thread.join(join_timeout_s)
        if not self._thread.is_alive() and not self.gave_up:
            self.sample()  # the last sample after the cell's work, so every work interval lies inside


class Sampler:
    """Start with `start()` before the cell's work and `stop()` after it; `stop()` returns the recording:
    {"interval_s", "sources": {name: {"samples": [(t, {field: value})], "errors", "last_error", "info",
    "scope"}}, "unavailable": {name: reason}}. Times are on `clock` (time.perf_counter, as the event log)."""

    def __init__(self, sources: list[Source], interval_s: float = 0.1, clock=time.perf_counter):
        if not interval_s > 0:
            raise ValueError(f"telemetry interval must be positive, not {interval_s}")
        self.sources = sources
        self.interval_s = interval_s
        self.clock = clock
        self.pollers: list[_Poller] = []
        self.unavailable: dict[str, str] = {}
        self._started = False

    def start(self) -> Sampler:
        for source in self.sources:
            try:
                source.open()
            except SourceUnavailable as e:
                self.unavailable[source.name] = str(e)
                continue
            except Exception as e:  # noqa: BLE001 - an unexpected failure disables that source only
                self.unavailable[source.name] = f"{type(e).__name__}: {e}"[:300]
                continue
            poller = _Poller(source, self.interval_s, self.clock)
            poller.start()
            self.pollers.append(poller)
        self._started = True
        return self

    def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {"interval_s": self.interval_s, "sources": {}, "unavailable": dict(self.unavailable)}
        if not self._started:
            return out
        for poller in self.pollers:
            poller._stop.set()  # signal every thread first, then wait: they wind down together
        for poller in self.pollers:
            poller.stop(join_timeout_s=max(2.0, 2 * poller.interval_s + getattr(poller.source, "timeout_s", 0)))
            try:
                info = poller.source.info()
                poller.source.close()
            except Exception as e:  # noqa: BLE001 - closing a source must not fail the cell
                info = {"close_error": f"{type(e).__name__}: {e}"[:300]}
            out["sources"][poller.source.name] = {
                "samples": poller.samples, "errors": poller.errors, "last_error": poller.last_error,
                "gave_up": poller.gave_up, "interval_s": poller.interval_s, "scope": poller.source.scope,
                "info": info}
        self._started = False
        return out
