"""Timing by turns: an operator configuration's cells (one per framework and mode), each in its own process set up as
the runner sets up any cell, alive at once and timing one block each in turn, so that the host's slow phases fall on
both sides of every ratio alike (docs/methodology/operators.md). Each round's blocks are taken within a fraction of a
second of each other; a configuration's ratio is then taken group by group (harness.results.measure.OpConfig).
 The protocol, over named pipes in the run folder (one per cell, and `ready`):
- a child, once its operator is built, warmed up and its block sized, writes READY to `ready` and waits on its pipe;
- the runner (Coordinator), once every child is ready, writes TURN to the first child's pipe;
- a child given its first TURN sizes its block (warm-up, then iterations until a block takes its minimum time),
  alone on the core, and writes TURN to the next child's pipe: the sizing round, untimed;
- a child given TURN times one block and writes TURN to the next child's pipe; after `rounds` blocks it passes the
  turn on once more and finishes as any cell does (its result, its exit code);
- a child that has timed its last block writes DONE to `ready`, so that the runner can tell a member that ended
  after its turns from one that ended before them;
- ABORT instead of TURN ends a child with an error that says why (a partner stopped, the run was interrupted); a child
  waits at most WAIT_S for its turn.
A child waiting for its turn sleeps in select(): two never compute at once, and on a CPU they share one core
(harness.scenarios.operator.ops.cpu_cores)."""

from __future__ import annotations

import os
import select
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

# Blocks a cell times in a group. 40 before; the groups differ more than a process's blocks (docs/methodology/
# operators.md, item 14), and 24 left a group's processes 3.2-3.5 s long on the 2-core machine against 4.4 s, time the
# precision rule spends on more groups where they are needed.
ROUNDS = 24
WAIT_S = 120.0   # the longest a child waits for its turn (a partner's block, or every partner's set-up)
TURN, ABORT, READY, DONE = b"t", b"x", b"r", b"d"


def enabled(env: dict[str, str] | None = None) -> bool:
    """HARNESS_OPERATOR_TURNS=off: each operator cell's process times its blocks alone, back to back (the method
    before timing by turns; for comparing the two, or a host where the group's processes cannot share pipes)."""
    value = (os.environ if env is None else env).get("HARNESS_OPERATOR_TURNS", "on").strip().lower()
    return value not in ("off", "0", "false", "no")


def own_seconds(result: dict[str, Any]) -> float | None:
    """A result's share of the wall time: its elapsed_s, divided among its group where it was timed by turns (the
    group's cells run at once, each elapsed the whole group's time). For the estimate of a run's length."""
    elapsed, group = result.get("elapsed_s"), result.get("turns")
    if not isinstance(elapsed, int | float):
        return None
    return elapsed / max(1, int(group.get("cells") or 1)) if isinstance(group, dict) else float(elapsed)


@dataclass(frozen=True)
class Group:
    """The pipes of one group of cells taking turns."""

    name: str
    folder: Path
    size: int

    def pipe(self, k: int) -> Path:
        return self.folder / f"turn{k}"

    @property
    def ready(self) -> Path:
        return self.folder / "ready"

    def spec(self, k: int) -> dict[str, Any]:
        """What cell k's child reads from its spec (`turns`)."""
        return {"group": self.name, "position": k, "cells": self.size, "rounds": ROUNDS, "pipe": str(self.pipe(k)),
                "next": str(self.pipe((k + 1) % self.size)), "ready": str(self.ready)}


def prepare(folder: Path, size: int, name: str) -> Group:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    group = Group(name, folder, size)
    for path in [group.ready, *(group.pipe(k) for k in range(size))]:
        os.mkfifo(path)
    return group


def _open(path: str | Path) -> int:
    # read and write: opening never blocks, and a write never fails for want of a reader
    return os.open(path, os.O_RDWR)


class Coordinator:
    """The runner's side: waits until every child is ready, gives the first turn, or tells them all to stop."""

    def __init__(self, group: Group):
        self.group = group
        self.ready_fd = _open(group.ready)
        self.pipes = [_open(group.pipe(k)) for k in range(group.size)]
        self.done = 0   # members that have timed their last block (DONE read from `ready`)
        self.aborted = False

    def wait_ready(self, alive: Callable[[], bool], poll_s: float = 0.5) -> bool:
        """True once every child has said it is ready; False as soon as `alive()` says one has ended."""
        seen = 0
        while seen < self.group.size:
            if select.select([self.ready_fd], [], [], poll_s)[0]:
                seen += len(os.read(self.ready_fd, self.group.size))
            elif not alive():
                return False
        return True

    def start(self) -> None:
        os.write(self.pipes[0], TURN)

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            for fd in self.pipes:
                os.write(fd, ABORT)

    def finished(self) -> int:
        """How many members have timed their last block so far."""
        while select.select([self.ready_fd], [], [], 0)[0]:
            self.done += os.read(self.ready_fd, self.group.size).count(DONE)
        return self.done

    def supervise(self, members: list[threading.Thread], poll_s: float = 0.5) -> None:
        """Give the first turn once every member (a thread running one cell's process) is ready; until they have all
        ended, stop the others as soon as one has ended before it was ready or before its last block: no turn would
        come back to them. A member that ended after its last block stops nobody: its partners may still be timing
        theirs."""
        if self.wait_ready(lambda: all(m.is_alive() for m in members), poll_s):
            self.start()
        else:
            self.abort()
        while any(m.is_alive() for m in members):
            for m in members:
                m.join(poll_s)
            if sum(not m.is_alive() for m in members) > self.finished():
                self.abort()

    def close(self) -> None:
        for fd in [self.ready_fd, *self.pipes]:
            os.close(fd)
        shutil.rmtree(self.group.folder, ignore_errors=True)
        try:
            self.group.folder.parent.rmdir()   # the run folder's .turns/, once no group is left in it
        except OSError:
            pass


# The probe before each block (docs/methodology/operators.md, item 14): the 2-core machine's memory is shared with
# the host's other guests and with its other vCPU. In phases of one to three seconds a 4 MiB read took 17-24% longer,
# and in the same seconds MindSpore's BatchNorm2d fwd+bwd (16 channels) ran 1,726-2,146 us an iteration against
# 1,390-1,510 us outside them (a PyTorch loop computing on the other core: 2,136-2,707 against 1,689-1,881 us), while
# a pure-Python loop and an L2-sized matmul kept their speed (slower drifts over tens of seconds the read does not
# see). Each block keeps that read's time beside it, the record of what the host's memory was doing. Waiting for a
# quiet read before a block was tried and not adopted: in a contended hour the waits ran to their limit and the blocks
# after a quiet read were as slow.
PROBE_BYTES = 4 << 20


class Probe:
    """One read of a fixed 4 MiB buffer, in seconds, after a first read that brings it back into the cache (a
    partner's block has evicted it)."""

    def __init__(self):
        import numpy as np

        self.buffer = np.ones(PROBE_BYTES // 4, np.float32)

    def __call__(self) -> float:
        self.buffer.sum()
        t = time.perf_counter()
        self.buffer.sum()
        return time.perf_counter() - t


def take_turns(spec: dict[str, Any], block: Callable[[], float], probe: Callable[[], float] | None = None,
               size: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """The child's side: say it is ready; on the first turn call `size()` (the sizing round: the block sized alone on
    the core) and pass the turn on; then time `block()` (one block's per-iteration seconds) each time the turn comes,
    passing it on, `spec["rounds"]` times. Returns the block times (`times`) and the memory probe (Probe) taken just
    before each (`probe_s`). HarnessError where a turn does not come or ABORT does."""
    mine, nxt, ready = _open(spec["pipe"]), _open(spec["next"]), _open(spec["ready"])
    probe = probe or Probe()
    out: dict[str, list[float]] = {"times": [], "probe_s": []}
    try:
        os.write(ready, READY)
        for turn in range(int(spec["rounds"]) + 1):
            if not select.select([mine], [], [], WAIT_S)[0]:
                raise HarnessError(f"timing by turns ({spec['group']}): no turn came in {WAIT_S:.0f} s; a partner "
                                   f"cell stopped (see its log); run again with --resume")
            if os.read(mine, 1) != TURN:
                raise HarnessError(f"timing by turns ({spec['group']}): stopped by the runner after "
                                   f"{len(out['times'])} of {spec['rounds']} blocks (a partner cell ended, or the "
                                   f"run was interrupted); run again with --resume")
            if turn == 0:
                if size is not None:
                    size()
            else:
                out["probe_s"].append(probe())
                out["times"].append(block())
            os.write(nxt, TURN)
        os.write(ready, DONE)
    finally:
        for fd in (mine, nxt, ready):
            os.close(fd)
    return out
