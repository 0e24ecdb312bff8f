"""The estimate held against wall times: each committed CPU run's cells estimated from the committed run of *another*
profile and sizes (never from themselves), beside what they measured, cell by cell and in total. The docs render it
(docs/methodology/estimate.md) and a test keeps it within the bounds below.

A cell's estimate is its planned repeats at the step model's price (harness.estimate.stepmodel), its range the
estimate's low and high ends (harness.estimate.runtime.plan, bounds=True). A cell that stops at its target where no
measured cell says when it reaches it is `open`: its estimate is the most it can take (its planned epochs), its low end
its first evaluation, and the bound it is held to is its range. The others are held to CELL_BOUND, and a total without
an open cell to TOTAL_BOUND; a total with one, to its range.

    compare(case, runs) -> Comparison
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config import matrix as matrix_mod
from harness.config.spec import ModelSpec
from harness.estimate import runtime
from harness.results.store import RunStore

# measured / estimated, for a cell priced from a cell of its model that does not stop at an unknown target
CELL_BOUND = (0.5, 2.0)
# |measured / estimated - 1| for a total none of whose cells is open
TOTAL_BOUND = 0.35


@dataclass(frozen=True)
class Case:
    title: str
    profile: str
    only: str | None
    reference: str      # the run folder the estimate reads (under docs/runs)
    measured: str       # the run folder whose cells it is held against


CASES = (Case("the target profile, from the quick profile's run", "target", None, "cpu-quick", "cpu-target"),
         Case("the quick profile's GCN and GRU cells, from the target profile's run", "quick",
              "model/gcn/*,model/gru/*", "cpu-target", "cpu-quick"))


@dataclass(frozen=True)
class Row:
    cell: str
    basis: str          # harness.estimate.stepmodel.pick's: like, model, kind, measured, none
    runs: int
    estimate_s: float
    low_s: float
    high_s: float
    measured_s: float | None
    open: bool          # stops at its target, and nothing measured says when

    @property
    def ratio(self) -> float | None:
        return self.measured_s / self.estimate_s if self.measured_s is not None and self.estimate_s else None

    def within(self) -> bool:
        if self.measured_s is None or self.basis == "none":
            return False
        if self.open:
            return self.low_s <= self.measured_s <= self.high_s
        lo, hi = CELL_BOUND
        return lo <= (self.ratio or 0.0) <= hi


@dataclass(frozen=True)
class Comparison:
    case: Case
    rows: list[Row]
    estimate_s: float
    low_s: float
    high_s: float
    measured_s: float
    whole: bool         # the measured total is the run's wall time (its whole profile), not its cells' sum
    device: str | None

    @property
    def open(self) -> bool:
        return any(r.open for r in self.rows)

    def within(self) -> bool:
        if self.open:
            return self.low_s <= self.measured_s <= self.high_s
        return abs(self.measured_s / self.estimate_s - 1) <= TOTAL_BOUND


def compare(case: Case, runs: Path = runtime.RUNS, matrix: matrix_mod.Matrix | None = None) -> Comparison:
    from harness.host.plan import Host

    m = matrix or matrix_mod.load()
    cells = m.expand(case.profile, case.only)
    host = Host("cpu", case.profile, 1, {}, m)
    ref, meas = runs / case.reference, runs / case.measured
    p = runtime.plan(matrix_mod.schedule(cells), [ref], skip=host.verdict, bounds=True)
    low, high = p["bounds"]["low"][0], p["bounds"]["high"][0]
    measured = runtime.per_cell(meas)
    rows = []
    for c in cells:
        if host.verdict(c):
            continue
        n = c.repeats

        def total(first: dict[str, float], rest: dict[str, float], cid: str = c.id, k: int = n) -> float:
            return first[cid] + (k - 1) * rest[cid]

        got = measured.get(c.id)
        donor = p["estimate"].donor.get(c.id)
        stops = isinstance(c.spec, ModelSpec) and c.spec.stop_at_target and not (donor and donor.reached_target)
        rows.append(Row(c.id, p["how"][c.id], n, total(p["first"], p["by_cell"]), total(low.first, low.per_cell),
                        total(high.first, high.per_cell), sum(got.values) if got else None, stops))
    meta = RunStore(meas).read_meta()
    whole = case.only is None
    share = 1.0 + (p["outside"] / max(p["cells"] + p["extra"], 1e-9) if whole else 0.0)
    measured_total = (runtime.wall_s(meta) if whole else None) or sum(r.measured_s or 0.0 for r in rows)
    return Comparison(case, rows, sum(r.estimate_s for r in rows) * share, sum(r.low_s for r in rows) * share,
                      sum(r.high_s for r in rows) * share, measured_total, whole, runtime.reference_device(meas))
