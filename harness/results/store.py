"""A run folder on disk: run.json, env.json and one folder per cell under cells/.

    DIR/run.json                      platform, profile, matrix, invocations
    DIR/env.json                      environment of the host (harness env)
    DIR/cells/<cell id>/r<k>.json     the result of repeat k (written last, atomically)
                        r<k>.log      the child's stdout and stderr
                        r<k>.mllog          the event log, MLPerf's :::MLLOG lines (harness.results.eventlog;
                                            r<k>.events.jsonl, bare JSON lines, in folders of schema 1)
                        r<k>.spec.json      what the child was asked to do

Results are only ever written with write_json_atomic (temp file + rename), so a reader sees
either the old file or the new one, never half of one. A result is never overwritten in place:
a re-run first moves the earlier result aside (r<k>.prev<n>.json).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.results import eventlog

RESULT_RE = re.compile(r"^r(\d+)\.json$")
# The newest run.json and result schema this harness writes and reads. 2: event logs are MLPerf's :::MLLOG lines
# (r<k>.mllog); 1: bare JSON lines (r<k>.events.jsonl), still read (harness.results.eventlog).
SCHEMA = 2
META_KEYS = ("platform", "profile")   # what every reader of run.json relies on
# Result keys that hold a number or null: a file holding anything else there is read as corrupt, not trusted.
NUMERIC_KEYS = ("first_epoch_throughput", "mean_throughput_other_epochs", "time_to_target_s", "best_metric",
                "test_metric", "throughput", "global_throughput", "per_device_throughput", "efficiency")


def write_atomic(path: str | Path, content: str | bytes) -> None:
    """Write a file so that a reader (or a crash) sees the old file or the new one, never half of one.

    A write that fails (a full disk, a read-only file system) leaves the old file, or none, and no temporary file,
    and raises OSError naming `path` (write() and fsync() report ENOSPC without a file name): harness.launch.faults
    turns it into one line."""
    path = Path(path)
    data = content.encode() if isinstance(content, str) else content
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    finally:
        if tmp is not None and os.path.exists(tmp):
            with contextlib.suppress(OSError):  # a file system turned read-only keeps it: a hidden .tmp, never read
                os.unlink(tmp)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=True, default=str))


def check_schema(path: Path, obj: dict[str, Any]) -> None:
    """Refuse a file written by a newer harness: its fields may mean something this one does not know."""
    schema = obj.get("schema", SCHEMA)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise HarnessError(f"{path}: schema is {schema!r}, not a number; the file was edited, restore it")
    if schema > SCHEMA:
        raise HarnessError(f"{path} has schema {schema}, newer than this harness reads ({SCHEMA}); "
                           f"update the harness (git pull) to read it")


class RunStore:
    LOCK = ".lock"   # held (flock) by the one runner writing this folder; its text says which
    _HELD: dict[Path, int] = {}   # run folder -> the lock's descriptor, per process (one process is one runner)

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.cells = self.root / "cells"

    def hold(self) -> None:
        """Take the run folder for this process: an exclusive flock on DIR/.lock, released by release() or when the
        process ends (the descriptor is not inherited by the cells). A second runner on the same folder, on this host
        or in a container with the folder mounted, is refused in one line before it reads or writes anything."""
        key = self.root.resolve()
        if key in self._HELD:
            return
        path = self.root / self.LOCK
        try:
            # Read-only: a descriptor open for writing would keep the folder's file system from being remounted
            # read-only under the run (flock needs no write access).
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise HarnessError(f"{self.root} cannot be taken for this run ({path.name}: {e.strerror}); make the folder "
                               f"writable, or choose another --out") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise HarnessError(f"{self.root} is in use by another run ({holder}); wait for it to end, or choose "
                               f"another --out") from None
        path.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
        self._HELD[key] = fd

    def release(self) -> None:
        fd = self._HELD.pop(self.root.resolve(), None)
        if fd is not None:
            os.close(fd)   # closing the descriptor drops the flock

    # -- run-level files ---------------------------------------------------------------------
    def is_run(self) -> bool:
        return (self.root / "run.json").is_file()

    def require_run(self) -> None:
        if not self.is_run():
            raise HarnessError(f"{self.root} is not a run folder (no run.json); give the --out folder of "
                               f"`python -m harness run`")

    def read_meta(self) -> dict[str, Any]:
        path = self.root / "run.json"
        try:
            meta = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise HarnessError(f"{path} cannot be read ({e}); the folder is not a usable run") from None
        if not isinstance(meta, dict):
            raise HarnessError(f"{path} holds {type(meta).__name__}, not an object; the folder is not a usable run")
        check_schema(path, meta)
        missing = [k for k in META_KEYS if not isinstance(meta.get(k), str)]
        if missing:
            raise HarnessError(f"{path} lacks {', '.join(map(repr, missing))}; it was not written by "
                               f"`python -m harness run` (or was edited): restore it, or re-run into a new --out")
        return meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.root / "run.json", meta)

    def read_env(self) -> dict[str, Any]:
        try:
            env = json.loads((self.root / "env.json").read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return env if isinstance(env, dict) else {}

    # -- cells ---------------------------------------------------------------------------------
    def cell_dir(self, cell_id: str) -> Path:
        return self.cells / cell_id

    def path(self, cell_id: str, repeat: int, suffix: str = ".json") -> Path:
        return self.cell_dir(cell_id) / f"r{repeat}{suffix}"

    def read_result(self, cell_id: str, repeat: int) -> dict[str, Any] | None:
        """The stored result, None if there is none, or a `failed` stand-in naming a corrupt file."""
        path = self.path(cell_id, repeat)
        if not path.exists():
            return None
        return self._load(path, cell_id, repeat)

    def _load(self, path: Path, cell_id: str, repeat: int) -> dict[str, Any]:
        try:
            obj = json.loads(path.read_text())
            if not isinstance(obj, dict) or not isinstance(obj.get("status"), str):
                raise ValueError("not a cell result object")
            check_schema(path, obj)
            bad = [k for k in NUMERIC_KEYS if obj.get(k) is not None
                   and (isinstance(obj[k], bool) or not isinstance(obj[k], int | float))]
            if bad:
                raise ValueError(f"{', '.join(bad)} not a number")
            return {**obj, "cell": cell_id, "repeat": repeat}   # the path is the truth
        except (OSError, ValueError) as e:
            return {"cell": cell_id, "repeat": repeat, "status": "failed", "corrupt": True,
                    "reason": f"corrupt result file {path} ({e}); re-run the cell with --resume"}

    def read_spec(self, cell_id: str, repeat: int) -> dict[str, Any] | None:
        """What the child of this (cell, repeat) was asked to do (r<k>.spec.json), None where it has none (a cell
        skipped before it ran) or it cannot be read."""
        try:
            spec = json.loads(self.path(cell_id, repeat, ".spec.json").read_text())
        except (OSError, ValueError):
            return None
        return spec if isinstance(spec, dict) else None

    def retire(self, cell_id: str, repeat: int) -> Path | None:
        """Move an earlier result of this cell (with its log and events) aside; return its new name."""
        path = self.path(cell_id, repeat)
        if not path.exists():
            return None
        n = 1
        while self.path(cell_id, repeat, f".prev{n}.json").exists():
            n += 1
        for suffix in (".json", ".log", eventlog.SUFFIX, eventlog.OLD_SUFFIX):
            if self.path(cell_id, repeat, suffix).exists():
                os.replace(self.path(cell_id, repeat, suffix), self.path(cell_id, repeat, f".prev{n}{suffix}"))
        return self.path(cell_id, repeat, f".prev{n}.json")

    def write_result(self, cell_id: str, repeat: int, result: dict[str, Any]) -> None:
        path = self.path(cell_id, repeat)
        if path.exists():
            raise FileExistsError(f"{path} exists: retire() it first, results are never overwritten")
        write_json_atomic(path, result)

    def results(self) -> list[dict[str, Any]]:
        """Every stored result, in cell-id order; corrupt files appear as `failed` with the reason."""
        out = []
        if not self.cells.is_dir():
            return out
        for path in sorted(self.cells.rglob("r*.json")):
            m = RESULT_RE.match(path.name)
            if m:
                cell_id = path.parent.relative_to(self.cells).as_posix()
                out.append(self._load(path, cell_id, int(m.group(1))))
        return out
