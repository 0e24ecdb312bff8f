"""Timing by turns: an operator configuration's cells (one per framework and mode), each in its own process set up as
the runner sets up any cell, alive at once and timing one block each in turn, so that the host's slow phases fall on
both sides of every ratio alike (docs/methodology/operators.md). Each round's blocks are taken within a fraction of a
second of each other; a configuration's ratio is then taken group by group (harness.measure.OpConfig).

The protocol, over named pipes in the run folder (one per cell, and `ready`):
- a child, once its operator is built, warmed up and its block sized, writes READY to `ready` and waits on its pipe;
- the runner (Coordinator), once every child is ready, writes TURN to the first child's pipe;
- a child given TURN times one block and writes TURN to the next child's pipe; after `rounds` blocks it passes the
  turn on once more and finishes as any cell does (its result, its exit code);
- a child that has timed its last block writes DONE to `ready`, so that the runner can tell a member that ended
  after its turns from one that ended before them;
- ABORT instead of TURN ends a child with an error that says why (a partner stopped, the run was interrupted); a child
  waits at most WAIT_S for its turn.
A child waiting for its turn sleeps in select(): two never compute at once, and on a CPU they share one core
(harness.operators.cpu_cores)."""

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

ROUNDS = 40      # blocks a cell times in a group: the prototype's 40 gave 12 of 12 and 9 of 12 ratios within ±5%
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


PROBE_LOOP = 20000   # iterations of probe()'s loop: about 0.5 ms on the 2-core machine


def probe() -> float:
    """Seconds of a fixed pure-Python loop: the speed the core runs at just now, whatever the process computes."""
    t = time.perf_counter()
    s = 0
    for i in range(PROBE_LOOP):
        s += i
    return time.perf_counter() - t


def take_turns(spec: dict[str, Any], block: Callable[[], float]) -> tuple[list[float], list[float]]:
    """The child's side: say it is ready, then time `block()` (one block's per-iteration seconds) each time the turn
    comes, passing it on, `spec["rounds"]` times. Returns the block times and the probe() times taken just before
    each block and once after the last (rounds + 1). HarnessError where a turn does not come or ABORT does."""
    mine, nxt, ready = _open(spec["pipe"]), _open(spec["next"]), _open(spec["ready"])
    times: list[float] = []
    probes: list[float] = []
    try:
        os.write(ready, READY)
        for _ in range(int(spec["rounds"])):
            if not select.select([mine], [], [], WAIT_S)[0]:
                raise HarnessError(f"timing by turns ({spec['group']}): no turn came in {WAIT_S:.0f} s; a partner "
                                   f"cell stopped (see its log); run again with --resume")
            if os.read(mine, 1) != TURN:
                raise HarnessError(f"timing by turns ({spec['group']}): stopped by the runner after "
                                   f"{len(times)} of {spec['rounds']} blocks (a partner cell ended, or the run was "
                                   f"interrupted); run again with --resume")
            probes.append(probe())
            times.append(block())
            if len(times) == int(spec["rounds"]):
                probes.append(probe())
            os.write(nxt, TURN)
        os.write(ready, DONE)
    finally:
        for fd in (mine, nxt, ready):
            os.close(fd)
    return times, probes
