"""Starting a cell's process and ending it: its own session, a wall-clock limit, live lines of its event log,
the launcher's port, and the interpreter shim every cell finds first on PATH. The runner decides what runs;
this module only starts, watches and ends processes."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

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
        # cwd = the cell's folder: frameworks drop files (MindSpore's rank_0/, kernel_meta/) into it. A Ctrl-C that
        # arrives while the process is being started is held until Popen has returned it, then acted on below: raised
        # inside Popen, after the fork, it would leave the child running in its own session with nobody to end it.
        held: list[int] = []
        old = _hold_signals(held)
        try:
            proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, cwd=cell_dir, env=env,
                                    start_new_session=True)
        finally:
            _restore_signals(old)
        try:
            for signum in held:   # the runner's own handler, now that the process can be ended
                handler = old.get(signum)
                if callable(handler):
                    handler(signum, None)
            rc = wait(proc, timeout_s, watch)
        except BaseException:
            kill_group(proc)
            raise
        kill_group(proc)  # also after a normal exit: a launcher's worker must not outlive its cell
    return rc


def _hold_signals(held: list[int]) -> dict:
    """SIGINT and SIGTERM recorded into `held` instead of handled, until _restore_signals; the handlers they had.
    Only the main thread can set handlers: elsewhere (a turn group's member, harness.scenarios.operator.turns) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, lambda signum, frame: held.append(signum))
            for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore_signals(old: dict) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)


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


@dataclass(frozen=True)
class Nodes:
    """Where this host stands in a multi-node run: HARNESS_NNODES hosts, this one HARNESS_NODE_RANK, the launchers'
    rendezvous at HARNESS_MASTER_ADDR:HARNESS_MASTER_PORT (node 0's address; the port fixed, since every host must
    name the same one). One host: Nodes() (count 1, rank 0), and each cell's launcher takes a free local port."""

    count: int = 1
    rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None

    @property
    def is_worker(self) -> bool:
        """A node other than node 0: it serves the multi-node cells, node 0 records their results."""
        return self.rank > 0

    def launcher_options(self) -> dict[str, str]:
        return {"nnodes": str(self.count), "node_rank": str(self.rank), "master_addr": self.master_addr}


def nodes(environ=None) -> Nodes:
    """The multi-node settings from the environment, checked: a bad one is one line naming the variable."""
    env = os.environ if environ is None else environ

    def number(name: str, default: int | None, least: int) -> int | None:
        raw = env.get(name, "").strip()
        if not raw:
            return default
        if not raw.isdigit() or int(raw) < least:
            raise HarnessError(f"{name}={raw!r} is not a whole number of at least {least}; set it on every host")
        return int(raw)

    count = number("HARNESS_NNODES", 1, 1)
    rank = number("HARNESS_NODE_RANK", 0, 0)
    port = number("HARNESS_MASTER_PORT", None, 1)
    addr = env.get("HARNESS_MASTER_ADDR", "").strip()
    if count == 1:
        if rank:
            raise HarnessError(f"HARNESS_NODE_RANK={rank} without HARNESS_NNODES: set HARNESS_NNODES to the number of "
                               f"hosts on every host, or unset HARNESS_NODE_RANK")
        return Nodes(master_port=port)
    if rank >= count:
        raise HarnessError(f"HARNESS_NODE_RANK={rank} with HARNESS_NNODES={count}: node ranks run from 0 to "
                           f"{count - 1}")
    missing = [v for v, val in (("HARNESS_MASTER_ADDR", addr), ("HARNESS_MASTER_PORT", port)) if not val]
    if missing:
        raise HarnessError(f"a multi-node run (HARNESS_NNODES={count}) needs {' and '.join(missing)}: node 0's address "
                           f"and a free port, the same on every host")
    if port is not None and port > 65535:
        raise HarnessError(f"HARNESS_MASTER_PORT={port} is not a port (1-65535)")
    return Nodes(count=count, rank=rank, master_addr=addr, master_port=port)


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


PID_LINE = "harness.launch.child: rank {rank} pid {pid}"


def pid_line(rank: int, pid: int) -> str:
    """The first line of a launched rank's log: harness.launch.child writes it, rank_pids reads it."""
    return PID_LINE.format(rank=rank, pid=pid)


def rank_pids(logs: list[Path]) -> dict[int, int]:
    """pid -> rank, from the first line of each rank's log."""
    out = {}
    for log in logs:
        m = re.match(re.escape(PID_LINE).replace(r"\{rank\}", r"(\d+)").replace(r"\{pid\}", r"(\d+)"),
                     first_line(log))
        if m:
            out[int(m.group(2))] = int(m.group(1))
    return out


def first_line(path: Path) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.readline()
    except OSError:
        return ""


# How each launcher names the first worker that died (pid, exit code; a signal is a negative code):
#   torchrun:  "Root Cause (first observed failure): ... exitcode  : -9 (pid: 338)"
#   msrun:     "Worker process 411 exit with exception. Error code: -9."
DEAD_WORKER = (re.compile(r"Root Cause.*?exitcode\s*:\s*(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)", re.S),
               re.compile(r"Worker process (?P<pid>\d+) exit with exception\. Error code: (?P<code>-?\d+)"))
# msrun's scheduler (on node 0) names a worker it lost: "worker 1 is the first one timed out".
LOST_WORKER = re.compile(r"worker (\d+) is the first one timed out")


def dead_worker(launcher_log: Path) -> tuple[int, int] | None:
    """(pid, exit code) of the first worker the launcher saw die, or None."""
    text = tail(launcher_log, 400)
    for pattern in DEAD_WORKER:
        m = pattern.search(text)
        if m:
            return int(m.group("pid")), int(m.group("code"))
    return None


def lost_worker(scheduler_log: Path) -> int | None:
    """The rank msrun's scheduler lost first (it stopped answering), or None."""
    m = LOST_WORKER.search(tail(scheduler_log, 400))
    return int(m.group(1)) if m else None


PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "Connection refused")


def peer_lost(text: str) -> bool:
    """Whether a rank's output says it lost a peer (the collective's connection to another rank closed), rather
    than an error of its own."""
    return any(m in text for m in PEER_LOST)


# What a framework prints after its error to say where to look next, never what went wrong: PyTorch's CUDA advice,
# and MindSpore's and CANN's pointers and section rules. A C++ call stack header ends what the log says of the error:
# below it come the framework's own frames.
ADVICE = re.compile("|".join((
    r"CUDA kernel errors might be asynchronously reported",
    r"For debugging consider passing CUDA_LAUNCH_BLOCKING",
    r"Compile with `TORCH_USE_CUDA_DSA`",
    r"Search for `cuda\w*' in https?://",
    r"For more details,? please refer to",
    r"\(Please search \"CANN Common Error Analysis\"",
    r"-{3,}$",
    r"- [A-Z][^:]*:( \(.*\))?$",   # MindSpore's section headers: '- Ascend Error Message:'
)))
CALL_STACK = re.compile(r"- C\+\+ Call Stack:")
# A CUDA kernel's failed assertion, one line per failing thread, printed before the error that reports it
# ('CUDA error: device-side assert triggered'): 'File.cu:16: kernel: block: [35,0,0], thread: [87,0,0] Assertion
# `...` failed.'
ASSERTION = re.compile(r"^(?:\S+:\d+: )?(?P<kernel>.+?): block: \[[^\]]*\], thread: \[[^\]]*\] "
                       r"(?P<what>Assertion .+ failed\.?)$")


def _names_error(line: str) -> bool:
    """'SomethingError: ...', its module's name before it or not ('torch.AcceleratorError: CUDA error: ...')."""
    head = line.split(":", 1)[0]
    return (all(part.isidentifier() for part in head.split("."))
            and (head.endswith(("Error", "Exception")) or head in ("KeyboardInterrupt",)))


def _with_assertion(error: str, lines: list[str]) -> str:
    """The error and, where a CUDA kernel's assertion failed, that assertion (the kernel's own words: the error line
    only says that one was triggered). After a failed device assertion the process's CUDA context is lost, so
    whatever error follows it is its consequence."""
    found = next((m for m in map(ASSERTION.match, reversed(lines)) if m), None)
    if not found or ASSERTION.match(error):
        return error
    return f"{error}; {found['kernel']}: {found['what']}"[:600]


def own_error(path: Path) -> str | None:
    """The error the log ends in: its last line that names an error (_names_error), with a CUDA kernel's failed
    assertion where there is one (_with_assertion); None where no line names an error."""
    lines = _lines(path)
    for line in reversed(lines):
        if _names_error(line):
            return _with_assertion(line[:300], lines)
    return None


def _lines(path: Path) -> list[str]:
    return [ln.strip() for ln in tail(path, 200).splitlines() if ln.strip()]


def last_error(path: Path) -> str:
    """The error itself: the line of the log that names it (own_error); else its last line above a C++ call stack
    that is not a framework's advice (ADVICE: a CUDA error's trailing 'Compile with `TORCH_USE_CUDA_DSA`...', a
    MindSpore error's 'For more details, please refer to...'); else its last line."""
    err = own_error(path)
    if err:
        return err
    lines = _lines(path)
    above = lines[:next((i for i, ln in enumerate(lines) if CALL_STACK.match(ln)), len(lines))]
    said = [ln for ln in above if not ADVICE.match(ln)]
    if said:
        return _with_assertion(said[-1][:300], lines)
    return lines[-1][:300] if lines else "no output"
