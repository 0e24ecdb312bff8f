"""Starting a cell's process and ending it: its own session, a wall-clock limit, live lines of its event log,
the launcher's port, and the interpreter shim every cell finds first on PATH. The runner decides what runs;
this module only starts, watches and ends processes."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

LOG_TAIL_LINES = 40
KILL_GRACE_S = 5.0
PROGRESS_POLL_S = 1.0


def interpreter_bin(root: Path) -> Path:
    """A folder whose `python` and `python3` run this interpreter, put first on every cell's PATH.

    Launchers start their workers by name: msrun runs `python child.py`, so with a virtual environment
    that is not on PATH (`.venv/bin/python -m harness`, as reproduce.sh runs it) the workers would get
    the system's Python, without the frameworks. The launchers themselves start as
    `sys.executable -m ...`, so no cell depends on what PATH holds. The shims are scripts, not symlinks:
    Python finds its virtual environment from the path it was started as, and a symlink elsewhere would
    lose it."""
    folder = root / ".interpreter"
    folder.mkdir(exist_ok=True)
    text = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n'
    for name in ("python", "python3"):
        shim = folder / name
        if not shim.is_file() or shim.read_text() != text:
            tmp = folder / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, shim)
    return folder


def start(argv: list[str], log_path: Path, cell_dir: Path, env: dict, timeout_s: float, watch) -> int | None:
    """Start a cell's process (or launcher) in its own session and wait for it: its exit code, None on timeout.
    `watch` (path, callback): the callback sees each new line of that file as it comes."""
    with open(log_path, "wb") as logf:
        # cwd = the cell's folder: frameworks drop files (MindSpore's rank_0/, kernel_meta/) into it.
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, cwd=cell_dir, env=env,
                                start_new_session=True)
        try:
            rc = wait(proc, timeout_s, watch)
        except BaseException:
            kill_group(proc)
            raise
        kill_group(proc)  # also after a normal exit: a launcher's worker must not outlive its cell
    return rc


def wait(proc: subprocess.Popen, timeout_s: float, watch) -> int | None:
    """Wait for the process (None when it outlives timeout_s), passing new lines of the watched file on."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while True:
        try:
            rc = proc.wait(timeout=min(PROGRESS_POLL_S, max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            rc = None
        if watch is not None:
            seen = new_lines(watch[0], seen, watch[1])
        if rc is not None:
            return rc
        if time.monotonic() >= deadline:
            return None


def new_lines(path: Path, offset: int, callback) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return offset
    end = chunk.rfind(b"\n") + 1
    for line in chunk[:end].decode(errors="replace").splitlines():
        callback(line)
    return offset + end


def port_clash(cell_dir: Path, repeat: int) -> bool:
    logs = [*cell_dir.glob(f"r{repeat}.rank*.log"), cell_dir / f"r{repeat}.log"]
    return any(m in tail(p, 200) for p in logs for m in ("Address already in use", "EADDRINUSE", "address in use"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def multi_node() -> dict[str, str]:
    """Several hosts: the launchers' own options, set through HARNESS_NNODES, HARNESS_NODE_RANK,
    HARNESS_MASTER_ADDR and HARNESS_MASTER_PORT (and the same --out layout on every host)."""
    env = {"nnodes": "HARNESS_NNODES", "node_rank": "HARNESS_NODE_RANK", "master_addr": "HARNESS_MASTER_ADDR"}
    return {k: os.environ[v] for k, v in env.items() if v in os.environ}


def kill_group(proc: subprocess.Popen) -> None:
    """End the process group the cell was started in: the child, or a launcher and all its workers."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if not group_alive(proc.pid):
            return


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def last_error(path: Path) -> str:
    """The line of the log that names the error (the last 'SomethingError: ...'), else its last line."""
    lines = [ln.strip() for ln in tail(path, 200).splitlines() if ln.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.isidentifier() and (head.endswith(("Error", "Exception")) or head in ("KeyboardInterrupt",)):
            return line[:300]
    return lines[-1][:300] if lines else "no output"
