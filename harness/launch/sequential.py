"""Sequential repeats: each comparison a verdict rests on gets the fewest repeats that decide it.

Every cell a claim compares first runs the profile's `claim_repeats` (at least two, so that each ratio has an
interval). Then, round by round, the claims are evaluated on what has been measured; a comparison (a claim's Part)
that is not yet *settled* asks for one more repeat of its cells, up to the profile's `max_repeats`; the run stops
when every comparison is settled or at its cap. The runner records each round in run.json (`rounds`: which
comparisons asked for more, their interval, their cells).

Why the rule is not simply "stop once the interval is conclusive". The report's interval (harness.results.measure.
ratio_interval, a percentile bootstrap) is taken at the repeats there are; at 2 repeats a side it spans the four
extreme ratios and covers the true ratio only 2/3 of the time (exactly: the two sides' ranges fail to overlap with
probability 2/C(4,2) under any continuous noise), at 3 repeats 9/10 (2/C(6,3)). Sampling until an interval is
conclusive ("optional stopping") adds a chance of a wrong conclusive verdict at every look. So:

- at a look before the cap, a comparison settles only when its interval, widened about its geometric centre by
  WIDEN[n] in log space (n: the fewest repeats among its cells), is conclusive (wholly below, inside or above the
  tie band). WIDEN[n] is calibrated (log-normal noise, equal spread on both sides, 6,000 draws a size; the rule is
  scale-free) so that a comparison whose true ratio lies on a band edge settles on the wrong side of it with
  probability at most EARLY_ERROR (one-sided), the coverage a 95% interval promises, instead of 1/6 at n = 2;
- at the cap it settles whatever its interval says, and the verdict is the plain interval's, as a fixed design of
  `max_repeats` repeats would give it.

So the chance of a wrong conclusive verdict is at most EARLY_ERROR per early look plus that of the fixed design at
the cap (union bound); `simulate` measures it for known ratios (tests/test_sequential.py, benchmarks/
sequential_repeats.py). A comparison that is inconclusive at its cap stays inconclusive: the report says so. The
verdict a report prints is always the plain interval's at the repeats taken (harness.claims).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from harness.claims import operators as operator_claims
from harness.claims.common import NOT_MEASURED, Claim, Part, interval_side
from harness.claims.paper import INCONCLUSIVE, TIE_RATIO
from harness.config import cellid
from harness.results import arith, measure

EARLY_ERROR = 0.025   # one-sided chance of settling on the wrong side of a band edge at a look before the cap
# Half-width factor in log space per repeats a side, from `python benchmarks/sequential_repeats.py --calibrate`
# (the 97.5th percentile of the factor that would have put a ratio at a band edge wholly on the wrong side);
# from 5 repeats on the plain interval misses by less than EARLY_ERROR (measured 1.7-1.9%), so no widening.
WIDEN = {2: 3.29, 3: 1.31, 4: 1.11}


def widen_factor(n: int) -> float:
    return WIDEN.get(n, 1.0) if n >= 2 else math.inf


def widened(interval: tuple[float, float | None], factor: float) -> tuple[float, float | None]:
    lo, hi = interval
    if hi is None or lo <= 0:
        return (lo if lo > 0 else 0.0, None) if factor > 1 else interval
    centre, half = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / 2
    return math.exp(centre - factor * half), math.exp(centre + factor * half)


def settles(interval: tuple[float, float | None] | None, n: int, cap: int) -> bool:
    """Whether a comparison with this interval at n repeats a side needs no more: at the cap always; before it only
    when the interval widened by WIDEN[n] is conclusive. No interval (one repeat a side) settles: more repeats are
    not this rule's to ask for."""
    if interval is None or n >= cap:
        return True
    if interval[0] <= 0:
        return False
    return interval_side(widened(interval, widen_factor(n))) != INCONCLUSIVE


@dataclass(frozen=True)
class Request:
    """A comparison that asks for one more repeat of `cells` (those of its cells still below the cap)."""

    claim: str
    part: str
    outcome: str
    interval: tuple[float, float | None] | None
    n: int
    cells: tuple[str, ...]

    def why(self) -> str:
        iv = measure.interval_text(self.interval)
        state = ("across an edge of the tie band" if self.outcome == INCONCLUSIVE else
                 f"{self.outcome} at the plain interval, not yet at the widened one (x{widen_factor(self.n):.2f})")
        return f"{self.claim} {self.part}: {self.n} repeats, 95% interval {iv}, {state}"

    def to_dict(self) -> dict:
        return {"claim": self.claim, "part": self.part, "outcome": self.outcome, "n": self.n,
                "interval": list(self.interval) if self.interval else None, "cells": list(self.cells),
                "why": self.why()}


def requests(claims: Iterable[Claim], counts: dict[str, int], cap: int, runnable: set[str]) -> list[Request]:
    """The comparisons not yet settled, each with its cells that may run again: in this run (`runnable`) and below
    the cap. `counts`: ok repeats per cell."""
    out = []
    for claim in claims:
        for part in claim.parts:
            if part.outcome == NOT_MEASURED or not part.cells:
                continue
            n = min(counts.get(c, 0) for c in part.cells)
            if settles(part.interval, n, cap):
                continue
            more = tuple(c for c in dict.fromkeys(part.cells) if c in runnable and counts.get(c, 0) < cap)
            if more:
                out.append(Request(claim.id, part.name, part.outcome, part.interval, n, more))
    return out


def part_settled(part: Part, counts: dict[str, int], cap: int) -> bool:
    return part.outcome == NOT_MEASURED or not part.cells or settles(
        part.interval, min(counts.get(c, 0) for c in part.cells), cap)


# -- Figure 5's precision: an operator ratio's interval within OPERATOR_PRECISION -----------------------------------
# Figure 5 draws every operator ratio with its interval, and O1-O3 compare groups of them; a configuration whose ratio's
# 95% interval is wider than ±5% of it asks for one more process of both its cells, up to the profile's
# `operator_max_repeats`. The rule looks at the interval's width only, never at which side of the tie band it lies on,
# so it cannot steer a verdict (the claims' parts keep the rule above). A process costs seconds; between processes a
# cell's time differs more than within one (docs/methodology/operators.md), and with two a side one slow process sets
# the interval.
OPERATOR_PRECISION = 0.05
# ... and one with fewer than OPERATOR_MIN_REPEATS processes a side asks for one more whatever its interval: Student's t
# over two groups is the spread of two numbers, and two that agree by chance give a half-width near zero (seen on the
# 2-core machine: BatchNorm2d fwd+bwd 256 channels, ±0.0% from two groups, 0.8% from the next sweep's ratio; three
# of 12 ratios outside the next sweep's interval, all three from two or three groups).
OPERATOR_MIN_REPEATS = 3


@dataclass(frozen=True)
class Precision:
    """An operator configuration whose ratio's interval is wider than OPERATOR_PRECISION asks for one more repeat."""

    config: str
    ratio: float
    interval: tuple[float, float]
    n: int
    cells: tuple[str, ...]

    @property
    def half_width(self) -> float:
        return measure.relative_half_width(self.interval, self.ratio)

    def why(self) -> str:
        reason = f"wider than ±{OPERATOR_PRECISION:.0%}" if self.half_width > OPERATOR_PRECISION \
            else f"fewer than {OPERATOR_MIN_REPEATS} repeats"
        return (f"Figure 5 {self.config}: {self.n} repeats, ratio {self.ratio:.3f}, 95% interval "
                f"{measure.interval_text(self.interval, 3)} (±{self.half_width:.1%}, {reason})")

    def to_dict(self) -> dict:
        return {"claim": "Figure 5", "part": self.config, "outcome": "wide", "n": self.n,
                "interval": list(self.interval), "cells": list(self.cells), "why": self.why()}


def precision_requests(ratios: Iterable, counts: dict[str, int], cap: int, runnable: set[str]) -> list[Precision]:
    """The operator configurations (harness.claims.operators.OpRatio) whose ratio's interval is wider than
    OPERATOR_PRECISION, or taken from fewer than OPERATOR_MIN_REPEATS processes a side, each with its cells that may
    run again (in this run and below `cap`)."""
    out = []
    for o in ratios:
        interval = measure.replicate_interval(o.replicates)
        # timed by turns, the groups the ratio is taken over: one left out (taken in a contended stretch,
        # harness.results.hostnoise) is replaced by another
        n = o.groups or min(counts.get(c, 0) for c in o.cells)
        if interval is None or (n >= OPERATOR_MIN_REPEATS and
                                measure.relative_half_width(interval, o.ratio) <= OPERATOR_PRECISION):
            continue
        more = tuple(c for c in dict.fromkeys(o.cells) if c in runnable and counts.get(c, 0) < cap)
        if len(more) == len(set(o.cells)):   # both sides, so that the ratio gains a process on each
            out.append(Precision(" ".join(cellid.configuration(o.cells[0])), o.ratio, interval, n, more))
    return out


def within_budget(asked: list[Precision], spent_s: float, budget_s: float | None, run_s: float) -> list[Precision]:
    """Of precision_requests' `asked`, as many as the rest of the profile's `budget_s` holds (operator_budget_s: what
    keeps a profile within its time on a noisy host), the run's operator cells having taken `spent_s` and one cell's
    process about `run_s`: those with fewer than OPERATOR_MIN_REPEATS first, then the widest. All of them where the
    profile sets no budget."""
    if budget_s is None:
        return asked
    out = sorted(asked, key=lambda p: (p.n >= OPERATOR_MIN_REPEATS, -p.half_width))
    kept, left = [], budget_s - spent_s
    for p in out:
        cost = run_s * len(p.cells)
        if cost > left or left <= 0:
            break
        kept.append(p)
        left -= cost
    return kept


# -- what the rule does with known ratios ------------------------------------------------------------------------
def simulate(ratio: float, cv: float, minimum: int, cap: int, trials: int, seed: int = 0,
             sequential: bool = True) -> dict[str, float]:
    """The rule on two cells with log-normal noise of spread `cv` whose true throughput ratio is `ratio`: the share of
    trials that end with a wrong conclusive verdict (the plain interval wholly on another side of the tie band than
    the true ratio), inconclusive, and the mean repeats a side. `sequential=False`: a fixed design of `cap` repeats."""
    rng = np.random.default_rng(seed)
    truth = arith.side(ratio, TIE_RATIO)
    wrong = unsure = total = 0
    for _ in range(trials):
        n = minimum if sequential else cap
        a, b = list(rng.lognormal(math.log(ratio), cv, n)), list(rng.lognormal(0.0, cv, n))
        while True:
            interval = measure.ratio_interval(measure.Sample(tuple(a)), measure.Sample(tuple(b)))
            if settles(interval, n, cap):
                break
            a.append(float(rng.lognormal(math.log(ratio), cv)))
            b.append(float(rng.lognormal(0.0, cv)))
            n += 1
        verdict = interval_side(interval)
        wrong += verdict not in (truth, INCONCLUSIVE)
        unsure += verdict == INCONCLUSIVE
        total += n
    return {"wrong": wrong / trials, "inconclusive": unsure / trials, "mean_repeats": total / trials}


# -- what a run says about its verdicts ---------------------------------------------------------------------------
PENDING, WAITING = "pending", "waiting for repeats"


def claim_kinds(claim_id: str) -> tuple[str, ...]:
    """The cell kinds a claim reads: the operator claims (O1-O3) operator cells, the others model and scaling cells."""
    return ("operator",) if claim_id in operator_claims.RULES else ("model", "scaling")


def states(claims: Iterable[Claim], counts: dict[str, int], cap: int, unfinished_kinds: set[str]) -> dict[str, str]:
    """Per claim: PENDING while some of its comparisons are not measured yet and cells of its kinds are still to run
    in this pass; WAITING while a comparison is not settled (more repeats to come); else its verdict."""
    out = {}
    for claim in claims:
        if (any(p.outcome == NOT_MEASURED for p in claim.parts)
                and unfinished_kinds.intersection(claim_kinds(claim.id))):
            out[claim.id] = PENDING
        elif not all(part_settled(p, counts, cap) for p in claim.parts):
            out[claim.id] = WAITING
        else:
            out[claim.id] = claim.verdict
    return out


def states_line(state: dict[str, str]) -> str:
    decided = sum(s not in (PENDING, WAITING) for s in state.values())
    return (f"verdicts ({decided} of {len(state)} decided): "
            + ", ".join(f"{cid} {s}" for cid, s in state.items()))
