"""`harness run --hours H`: the runner's side of a run planned to the hours booked (the plan itself, and the re-plan,
are harness.estimate.fit's). Before the first cell the plan is made from the estimate's upper bound and said; the
cells it leaves out are decided skipped, with the reason, so that they are recorded as such and the report lists
them; after each cell the runs to come are priced again from this run's own cells and whatever no longer fits is
left out, in one line; a cell whose price would end past the hours does not start. run.json keeps the plan
(`booking`), the report says it.

The clock starts at $HARNESS_BOOKING_START (seconds since the epoch: reproduce.sh sets it as it starts, so that the
build and the downloads count against the hours), else when `harness run` started.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any

from harness.claims import reads
from harness.config.cell import Cell
from harness.errors import HarnessError
from harness.estimate import fit as fit_mod
from harness.estimate import runtime as estimate
from harness.host import envinfo
from harness.host.plan import SKIP
from harness.results.units import duration
from harness.scenarios.operator import turns

# `s` below is the runner's RunState (harness.launch.runner), not imported: the runner imports this module.
RunState = Any

START = "HARNESS_BOOKING_START"


def started(now: float | None = None) -> float:
    """When the booking's clock started: $HARNESS_BOOKING_START where set (not in the future), else now."""
    now = time.time() if now is None else now
    raw = os.environ.get(START)
    if not raw:
        return now
    try:
        t = float(raw)
    except ValueError:
        raise HarnessError(f"{START}={raw!r} is not a time in seconds since the epoch; unset it, or set it to "
                           f"$(date +%s) when the booking starts") from None
    if t > now + 60:
        raise HarnessError(f"{START}={raw} is in the future ({duration(t - now)} from now); unset it, or set it to "
                           f"$(date +%s) when the booking starts")
    return t


@dataclass
class Booked:
    """What the runner keeps of the plan: the clock and the runs in their three passes."""
    clock: fit_mod.Clock
    late: list[tuple[Cell, int]]    # the companion cells, after the sequential repeats
    tail: list[tuple[Cell, int]]    # the runs recorded as skipped (this host's skips, and what the plan left out)


def plan(s: RunState, hours: float, t0: float, here: str | None) -> Booked:
    """Fit the run's planned runs to the hours left (module docstring); say the plan; the decisions of the cells it
    leaves out become skips; s.todo becomes the first pass (tiers claims and tables)."""
    folders, _ = estimate.references(s.platform, s.profile, cpu=envinfo.cpu_for(s.platform))
    skipped = {cid: d.skip for cid, d in s.decisions.items() if d.skip}
    if folders:
        p = estimate.plan(s.todo, folders, here=here, synthetic=s.fake, skip=lambda c: skipped.get(c.id),
                          on_device=s.platform != "cpu", bounds=True)
        priced = fit_mod.entries(s.todo, p)
    else:   # nothing committed prices this profile here: every run at its cell's timeout
        priced = [fit_mod.Entry(c, r, float(c.timeout_s), known=False) for c, r in s.todo if c.id not in skipped]
    owed = [(w, sec) for w, sec in fit_mod.owed(s.platform, {c.framework for c in s.cells})
            if not w.startswith("the build")]   # the build is behind us: the clock started before it
    now = time.time()
    spent = [("the time before the first cell", now - t0)] if now - t0 >= 1 else []
    reserved = spent + owed
    budget = hours * 3600 - sum(sec for _, sec in reserved)
    fitted = fit_mod.fit(priced, reads.needs(s.cells), budget, hours=hours, skipped=skipped, cap=s.cap,
                         reserved=reserved)
    for line in fitted.lines():
        s.log(line)
    for cid, why in fitted.left.items():
        s.decisions[cid] = replace(s.decisions[cid], action=SKIP, reason=why, by="hours")
    first = [(e.cell, e.repeat) for e in fitted.first]
    late = [(e.cell, e.repeat) for e in fitted.late]
    running = {(c.id, r) for c, r in first + late}   # (a Cell is not hashable: its spec's tables are read-only)
    tail = [(c, r) for c, r in s.todo if (c.id, r) not in running]
    s.todo = first
    s.meta["booking"] = fitted.to_dict() | {"started_at": t0, "deadline": t0 + hours * 3600}
    s.store.write_meta(s.meta)
    return Booked(fit_mod.Clock(fitted, t0 + hours * 3600), late, tail)


def before(s: RunState, b: Booked, cell: Cell, repeat: int) -> None:
    """A run about to start whose price would end past the hours: left out (decided skipped), in one line."""
    d = s.decisions[cell.id]
    if d.action == SKIP or b.clock.fits(cell, repeat):
        return
    why = f"left out to fit {b.clock.fit.hours:g} h: its price would end past them"
    s.decisions[cell.id] = replace(d, action=SKIP, reason=why, by="hours")
    b.clock.fit.left[cell.id] = why
    _unplan(s, b, {cell.id})
    s.log(f"{cell.id} r{repeat}: {why} ({duration(b.clock.price(cell, repeat))}, "
          f"{duration(max(b.clock.left_s(), 0))} left)")


def after(s: RunState, b: Booked, done: list[tuple[Cell, int]], rest: list[tuple[Cell, int]]) -> None:
    """Runs that finished: their seconds teach the prices; the runs to come (`rest`) re-planned."""
    for cell, repeat in done:
        r = s.store.read_result(cell.id, repeat) or {}
        if r.get("status") not in (None, "skipped", "served"):
            b.clock.measured(cell, repeat, turns.own_seconds(r))
    dropped, line = b.clock.replan([(c, r) for c, r in rest if s.decisions[c.id].action != SKIP])
    for cid in dropped:
        s.decisions[cid] = replace(s.decisions[cid], action=SKIP, reason=b.clock.fit.left[cid], by="hours")
    _unplan(s, b, set(dropped))
    if not line:
        return
    s.log(line)
    s.meta["booking"].update(left=dict(b.clock.fit.left), replans=list(b.clock.fit.replans),
                             decided=[n.name for n in b.clock.fit.decided],
                             undecided=[[n.name, why] for n, why in b.clock.fit.undecided])
    s.store.write_meta(s.meta)


def _unplan(s: RunState, b: Booked, cells: set[str]) -> None:
    """The progress's estimate of what is left stops counting the runs left out (RunProgress.planned is in the order
    of the plan's three passes)."""
    planned = s.progress.planned
    if not cells or planned is None:
        return
    for k, (c, _) in enumerate(s.todo + b.late + b.tail):
        if c.id in cells and k >= s.progress.done and k < len(planned):
            planned[k] = 0.0


def rounds(s: RunState, b: Booked, extra: list[tuple[Cell, int]]) -> list[tuple[Cell, int]]:
    """A round's sequential repeats that fit what is left of the hours, in the order asked (the companion cells after
    them get what remains: the repeats come first); those that do not, said in one line."""
    left, keep = b.clock.left_s(), []
    for cell, repeat in extra:
        price = b.clock.price(cell, repeat)
        if price <= left:
            keep.append((cell, repeat))
            left -= price
    if len(keep) < len(extra):
        s.log(f"{len(extra) - len(keep)} of the {len(extra)} repeats asked do not fit what is left of "
              f"{b.clock.fit.hours:g} h ({duration(max(b.clock.left_s(), 0))}): not run")
        kept = {(k.id, q) for k, q in keep}
        s.meta["booking"].setdefault("repeats_left_out", []).extend(
            [c.id, r] for c, r in extra if (c.id, r) not in kept)
    return keep
