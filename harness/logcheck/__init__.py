"""`python -m harness check-logs DIR`: MLPerf's own compliance checker (`python -m mlperf_logging.compliance_checker`,
training ruleset 6.1.0) on the event log of every model and scaling cell of a run folder, with this folder's config:
common.yaml (the ruleset's common rules and the harness's order) and one rules file per workload, in its model's
folder (harness/models/<model>/logcheck.yaml), which common.yaml enqueues from the log's submission_benchmark. One
line per log, a summary, and exit 2 with one line (`error: ...`) when any log fails; the checker's whole output for
one log is the command the line names.

Operator, inference and passes cells are timings, not MLPerf training runs: not checked. Run folders of schema 1
(bare-JSON event logs) are refused in one line.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError
from harness.results import eventlog
from harness.results.store import RunStore

CONFIG = Path(__file__).resolve().parent / "common.yaml"
USAGE, RULESET = "training", "6.1.0"
CHECKED_KINDS = ("model", "scaling")
_SEPARATOR = "-" * 30  # between the checker's messages (mlp_compliance.log_messages)


def command(log: str | Path) -> list[str]:
    """The checker's command line for one log."""
    return [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", USAGE, "--ruleset", RULESET,
            "--config", str(CONFIG), "--log_output", os.devnull, str(log)]


def check(log: str | Path) -> tuple[bool, str]:
    """(passed, why): the checker's verdict on one log; `why` is its first messages in one line."""
    proc = subprocess.run(command(log), capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    if proc.returncode == 0 and "SUCCESS" in out:
        return True, "SUCCESS"
    return False, _reasons(out) or f"the checker exited with {proc.returncode}"


def _reasons(out: str, most: int = 3) -> str:
    """The checker's messages, each as its first line and its failed test, joined in one line."""
    messages = []
    for chunk in out.split(_SEPARATOR):
        lines = [line.removeprefix("WARNING - ").strip() for line in chunk.strip().splitlines()]
        lines = [line for line in lines if line and not line.startswith(("INFO - ", "** Logging output"))]
        if not lines:
            continue
        failed = next((line.removeprefix("failed test:").strip() for line in lines
                       if line.startswith("failed test:")), None)
        messages.append(": ".join(filter(None, (lines[0].rstrip(":"), failed))))
    # A failed rule first, then missing keys (the checker prints them in the other order; "No log lines detected" last).
    messages = sorted((m for m in messages if m and m != "ERROR - FAILED"), key=lambda m: m.startswith("Required"))
    more = f" (+{len(messages) - most} more)" if len(messages) > most else ""
    return "; ".join(messages[:most]) + more


def logs(store: RunStore) -> list[tuple[dict, Path]]:
    """(result, event log) of every checked cell repeat: model and scaling cells that ran (every rank's log)."""
    out = []
    for result in store.results():
        if result.get("kind") not in CHECKED_KINDS or result.get("status") == "skipped":
            continue
        cell_dir, repeat = store.cell_dir(result["cell"]), result["repeat"]
        found = sorted(cell_dir.glob(f"r{repeat}.rank*{eventlog.SUFFIX}")) or [
            store.path(result["cell"], repeat, eventlog.SUFFIX)]
        out += [(result, path) for path in found]
    return out


def check_run(run: Path, log: Callable[[str], None] = print) -> int:
    """Check every model and scaling cell's log of a run folder; 0 when all pass (HarnessError otherwise)."""
    store = RunStore(run)
    store.require_run()
    eventlog.require_mllog_folder(run, store.read_meta(), "MLPerf's checker reads :::MLLOG lines only")
    if importlib.util.find_spec("mlperf_logging") is None:
        raise HarnessError("mlperf_logging is not installed in this Python; install the lock: "
                           "pip install --require-hashes -r requirements/cpu.txt")
    todo = logs(store)
    if not todo:
        raise HarnessError(f"{run} holds no model or scaling cell that ran; nothing to check")
    failed = []
    for result, path in todo:
        ok, why = (False, "no event log") if not path.exists() else check(path)
        status = "" if result.get("status") == "ok" else f" (cell {result.get('status')})"
        log(f"{'SUCCESS' if ok else 'FAILED '} {path.relative_to(store.cells)}{status}" + ("" if ok else f": {why}"))
        if not ok:
            failed.append(path)
    log(f"{len(todo)} logs checked by mlperf_logging's compliance checker (--usage {USAGE} --ruleset {RULESET} "
        f"--config {CONFIG.relative_to(CONFIG.parents[2])}): {len(todo) - len(failed)} SUCCESS, {len(failed)} FAILED")
    if failed:
        raise HarnessError(f"{len(failed)} of {len(todo)} event logs fail MLPerf's compliance checker; its whole "
                           f"output for the first: {shlex.join(command(failed[0]))}")
    return 0
