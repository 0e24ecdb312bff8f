"""MLPerf-style event log: one JSON object per line, flushed as it is written, so a cell that
crashes or is killed still leaves every event it reached on disk.

Each line carries the mlperf_logging fields (namespace, time_ms, event_type, key, value, metadata)
plus `elapsed_s`, seconds on the monotonic clock since the log was opened (the run's clock).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

POINT, START, END = "POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"


class EventLog:
    def __init__(self, path: str | Path):
        self._t0 = time.perf_counter()
        self._f = open(path, "a", buffering=1)  # line-buffered: every event reaches the file at once

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def log(self, key: str, value: Any = None, event_type: str = POINT, **metadata: Any) -> float:
        elapsed = self.elapsed()
        self._f.write(json.dumps({"namespace": "", "time_ms": int(time.time() * 1000), "event_type": event_type,
                                  "key": key, "value": value, "metadata": metadata, "elapsed_s": elapsed}) + "\n")
        return elapsed

    def close(self) -> None:
        self._f.close()


def read(path: str | Path) -> list[dict[str, Any]]:
    """Events from a log; a line cut short by a kill is dropped, the rest kept."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return out
