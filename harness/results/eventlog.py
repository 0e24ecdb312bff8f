"""A cell's event log, in MLPerf's own format, written with MLPerf's own library (`mlperf_logging.mllog`).
 Every line is `:::MLLOG {"namespace", "time_ms", "event_type", "key", "value", "metadata"}`, the lines MLPerf's
parser and compliance checker read (`python -m harness check-logs DIR` runs the checker on a run folder). mllog's
`time_ms` is wall-clock time; the harness times everything from `metadata.elapsed_s`, seconds on the monotonic clock
since the log was opened (the run's clock). mllog adds `metadata.file` and `metadata.lineno`: the call that logged.
 Each log is its own `logging.Logger`, not registered with the logging module (so nothing propagates to a root
logger or a framework's handlers and nothing reaches the console), writing to its file only, one line per event,
flushed as it is written: a cell that crashes or is killed still leaves every event it reached on disk.
 Keys: MLPerf's (`mllog.constants`) where one exists; the harness's own are declared below (OWN_KEYS). `log` refuses
any other key, so a typo cannot make a log that no reader and no checker rule understands.

Run folders of schema 1 (before MLPerf's format) hold `r<k>.events.jsonl`: one bare JSON object per line, with
`elapsed_s` beside the mllog fields. `read` reads both formats into the same dicts (`elapsed_s` at the top level).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import constants, mllog

from harness.errors import HarnessError
from harness.paths import REPO

POINT, START, END = constants.POINT_IN_TIME, constants.INTERVAL_START, constants.INTERVAL_END
SUFFIX = ".mllog"              # r<k>.mllog; a rank of a multi-process cell: r<k>.rank<n>.mllog
OLD_SUFFIX = ".events.jsonl"   # the event logs of run folders of schema 1 (bare JSON lines)
MLLOG_SCHEMA = 2               # the first run.json schema whose event logs are :::MLLOG lines
PREFIX = ":::MLLOG "           # what MLPerf's parser looks for (mlperf_logging's LOG_TEMPLATE)

# MLPerf's keys the harness logs, by their mllog.constants names.
INIT_START, INIT_STOP = constants.INIT_START, constants.INIT_STOP
RUN_START, RUN_STOP = constants.RUN_START, constants.RUN_STOP
EPOCH_START, EPOCH_STOP = constants.EPOCH_START, constants.EPOCH_STOP
EVAL_START, EVAL_STOP, EVAL_ACCURACY = constants.EVAL_START, constants.EVAL_STOP, constants.EVAL_ACCURACY
SUCCESS, ABORTED = constants.SUCCESS, constants.ABORTED

# The harness's own keys: what it logs that MLPerf has no key for.
TEST_METRIC = "test_metric"    # the model's metric on the test split, measured after run_stop (not timed)
OPT_MOMENTUM = "opt_momentum"  # SGD's momentum (mllog has LARS's only)
OWN_KEYS = frozenset({TEST_METRIC, OPT_MOMENTUM})

VOCABULARY = frozenset(v for k, v in vars(constants).items() if k.isupper() and isinstance(v, str)) | OWN_KEYS
_METHOD = {POINT: "event", START: "start", END: "end"}
_REPO = str(REPO)


class EventLog:
    def __init__(self, path: str | Path):
        self._t0 = time.perf_counter()
        self._f = open(path, "a", buffering=1)  # line-buffered; the handler also flushes after every record
        logger = logging.Logger(f"harness.results.eventlog:{path}", logging.INFO)  # private: not in logging's registry
        logger.propagate = False
        handler = _RaisingHandler(self._f)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.addFilter(_refuse_mllog_errors)
        # stack offset 2: metadata.file/lineno name the caller of log(), not this module. mllog trims root_dir
        # from the file name with a regular expression, hence the escape.
        self._mllogger = mllog.MLLogger(logger=logger, default_stack_offset=2, root_dir=re.escape(_REPO))

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def log(self, key: str, value: Any = None, event_type: str = POINT, **metadata: Any) -> float:
        """One event (POINT, START or END) with `metadata`; returns its elapsed_s."""
        if key not in VOCABULARY:
            raise ValueError(f"event key {key!r} is neither an mlperf_logging.mllog.constants key nor one of "
                             f"harness.results.eventlog.OWN_KEYS; declare it there")
        elapsed = self.elapsed()
        getattr(self._mllogger, _METHOD[event_type])(key, value, metadata={**metadata, "elapsed_s": elapsed})
        return elapsed

    def close(self) -> None:
        self._f.close()


class _RaisingHandler(logging.StreamHandler):
    """Raises what it cannot write (a full disk, a read-only folder), as a plain write would: logging's handler
    prints a traceback and goes on, and the cell would run on with its events lost unseen."""

    def handleError(self, record: logging.LogRecord) -> None:
        raise  # noqa: PLE0704 - called by emit() inside its `except`: re-raises the write's error


def _refuse_mllog_errors(record: logging.LogRecord) -> bool:
    """mllog catches any error of an event (a value JSON cannot encode, a write that failed) and logs an ERROR line
    instead of the event: raise the write's own error, or refuse the event."""
    if record.levelno > logging.INFO:
        pending = sys.exc_info()[1]  # what mllog caught
        if isinstance(pending, OSError):
            raise pending
        raise ValueError(f"mlperf_logging could not log an event: {record.getMessage().strip()}")
    return True


def parse_line(line: str) -> dict[str, Any] | None:
    """One event from a line of either format (with `elapsed_s` at the top level), None for anything else: a
    line cut short by a kill, a line that is not an event."""
    line = line.strip()
    try:
        if line.startswith(PREFIX):
            event = json.loads(line[len(PREFIX):])
            event["elapsed_s"] = event["metadata"]["elapsed_s"]
        elif line.startswith("{"):  # schema 1
            event = json.loads(line)
        else:
            return None
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return event if isinstance(event, dict) and "key" in event and "elapsed_s" in event else None


def read(path: str | Path) -> list[dict[str, Any]]:
    """Events from a log of either format; a line cut short by a kill is dropped, the rest kept."""
    try:
        with open(path) as f:
            return [e for e in map(parse_line, f) if e is not None]
    except FileNotFoundError:
        return []


def require_mllog_folder(root: str | Path, meta: dict[str, Any], consequence: str) -> None:
    """One line (HarnessError) for a run folder written before event logs were MLPerf's format."""
    schema = meta.get("schema", 1)
    if isinstance(schema, int) and schema < MLLOG_SCHEMA:
        raise HarnessError(f"{root} is a run folder of schema {schema}, written before event logs were MLPerf's "
                           f":::MLLOG lines (its r<k>{OLD_SUFFIX} hold bare JSON): {consequence}; re-run its cells "
                           f"into a new --out")
