"""A run planned to the hours booked (`--hours H` on `harness run`, `harness estimate` and `reproduce.sh`): what runs,
what is left out and why, decided before the first cell from each planned run's price at the estimate's upper bound,
and again as the run measures (Fit.replan).

What fits is taken in this order, until the hours are spent:
1. claims: every claim's parts (harness.claims.reads: C1-C4 per model, C5 per model, AMP level and device count,
   O1-O3 per operator) at the repeats their intervals need, the cheapest part first, so that the hours decide as many
   parts as they can; a part whose cells this host skips (too few devices, too little memory) is not decided, and says
   why;
2. tables: the paper's tables' other cells (the paper's models in the other modes and AMP levels, the operators'
   other modes), in run order, each that fits;
3. repeats: the sequential repeats of the comparisons not yet settled (harness.launch.sequential), up to max_repeats,
   from what the first two leave;
4. companion: the companion studies' cells (their models, inference and passes), after the repeats, each that fits.
A planned run nothing measured can price is priced at its cell's timeout and said to be so, never at 0 s.

After each cell the runs still to come are priced again from this run's own cells (the same cell where it ran; else
the measured-over-estimated ratio of the nearest cell that ran: the same model, precision and framework, the same
model, the same kind, any), and where they no longer fit what is left, the lowest priority goes first (companion,
then tables, then the claims' most expensive part). No cell starts that its price says would end past the hours, so a
run never passes them by more than one cell's timeout (a price that was too low).

    fit(entries, needs, budget_s, ...) -> Fit
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from harness.claims.paper import PAPER_MODELS
from harness.claims.reads import CLAIM_ORDER, Need
from harness.config.cell import Cell
from harness.devices.catalog import precision
from harness.results.units import duration

TIERS = ("claims", "tables", "repeats", "companion")
SKIPPED = " is skipped here: "
TIER_WORDS = {"tables": "paper's tables'", "companion": "companion study's"}


def tier_of(cell: Cell) -> str:
    """The tier a cell falls in when no claim's part holds it: the paper's tables, or a companion study's."""
    if cell.kind == "operator" or cell.kind in ("model", "scaling") and cell.model in PAPER_MODELS:
        return "tables"
    return "companion"


@dataclass
class Entry:
    """One planned (cell, repeat) and its price: seconds at the estimate's upper bound; `known` False where nothing
    measured prices it (then its cell's timeout)."""
    cell: Cell
    repeat: int
    seconds: float
    known: bool = True


@dataclass
class Fit:
    hours: float
    budget_s: float                        # the seconds the cells may take, from the first cell on
    reserved: list[tuple[str, float]]      # what the hours hold besides the cells: (what, seconds)
    first: list[Entry]                     # tiers 1-2, in run order
    late: list[Entry]                      # tier 4, after the sequential repeats
    tier: dict[str, str]                   # cell id -> its tier
    left: dict[str, str]                   # cell id -> why it is left out
    decided: list[Need]                    # the parts the plan decides
    undecided: list[tuple[Need, str]]      # the parts it does not, and why
    repeats_s: float                       # the most the sequential repeats could take (cap), at the upper bound
    unknown: list[str] = field(default_factory=list)   # cells nothing measured prices (at their timeout)
    replans: list[str] = field(default_factory=list)   # the re-plans' lines, as said

    @property
    def planned_s(self) -> float:
        return sum(e.seconds for e in self.first + self.late)

    def lines(self) -> list[str]:
        """What the run says before its first cell: the budget, what runs, and per claim what is decided and not."""
        spare = self.budget_s - self.planned_s
        reserved = "".join(f", less {what} {duration(s)}" for what, s in self.reserved)
        out = [f"planned for {self.hours:g} h{reserved}: {duration(max(self.budget_s, 0))} for the cells; "
               f"{len(self.first) + len(self.late)} runs of {len({e.cell.id for e in self.first + self.late})} "
               f"cells fit at the estimate's upper bound ({duration(self.planned_s)}), "
               f"{duration(max(spare, 0))} left for the sequential repeats (up to {duration(self.repeats_s)})"
               + (f"; {len(self.left)} cells left out" if self.left else "")]
        out += [f"    {line}" for line in claim_lines(self.decided, self.undecided)]
        for t in ("tables", "companion"):
            ran = {e.cell.id for e in self.first + self.late if self.tier[e.cell.id] == t}
            out_ = [c for c, why in self.left.items() if self.tier.get(c) == t]
            if ran or out_:
                out.append(f"    {t}: {len(ran)} cells run" + (f", {len(out_)} left out" if out_ else ""))
        if self.unknown:
            out.append(f"    priced at their timeout, nothing measured prices them: {', '.join(self.unknown)}")
        return out

    def short(self) -> tuple[str, str]:
        """(what it decides, per claim: "C1 3/3, C3 3/4, ..."; what it does not and why, one clause per claim)."""
        yes, no = [], []
        for claim in CLAIM_ORDER:
            d = [n for n in self.decided if n.claim == claim]
            u = [(n, why) for n, why in self.undecided if n.claim == claim]
            if d or u:
                yes.append(f"{claim} {len(d)}/{len(d) + len(u)}")
            timed = [(n, why) for n, why in u if SKIPPED not in why]
            no += [f"{n.name} ({why})" for n, why in timed]
            skipped = [why.split(SKIPPED, 1)[1] for n, why in u if SKIPPED in why]
            if skipped:
                no.append(f"{claim} on {len(skipped)} part{'s' if len(skipped) > 1 else ''}: its cells are skipped "
                          f"there ({'e.g. ' if len(set(skipped)) > 1 else ''}{skipped[0]})")
        return ", ".join(yes), "; ".join(no) or "none"

    def to_dict(self) -> dict[str, Any]:
        """What run.json keeps of the plan (`booking`), and the report reads."""
        return {"hours": self.hours, "budget_s": round(self.budget_s, 1),
                "reserved": [[w, round(s, 1)] for w, s in self.reserved], "planned_s": round(self.planned_s, 1),
                "repeats_s": round(self.repeats_s, 1),
                "decided": [n.name for n in self.decided],
                "undecided": [[n.name, why] for n, why in self.undecided],
                "left": dict(self.left), "tier": dict(self.tier), "unknown": list(self.unknown),
                "replans": list(self.replans), "lines": self.lines()}


def claim_lines(decided: Sequence[Need], undecided: Sequence[tuple[Need, str]]) -> list[str]:
    """Per claim, on what it is decided and on what not, and why: "C3: decided on gcn, gru; not on bert: ..."."""
    out = []
    for claim in CLAIM_ORDER:
        yes = [n.subject for n in decided if n.claim == claim]
        no = [(n.subject, why) for n, why in undecided if n.claim == claim]
        if not yes and not no:
            continue
        line = f"{claim}: " + (f"decided on {', '.join(yes)}" if yes else "not decided")
        skipped = [(s, why) for s, why in no if SKIPPED in why]
        timed = [(s, why) for s, why in no if SKIPPED not in why]
        clauses = [f"{s} ({why})" for s, why in timed]
        if skipped:   # one clause for the parts whose cells this host skips: their reasons, each once
            reasons = list(dict.fromkeys(why.split(SKIPPED, 1)[1] for _, why in skipped))
            clauses.append(f"{', '.join(s for s, _ in skipped)} (cells skipped here: {'; '.join(reasons[:2])}"
                           + (f" and {len(reasons) - 2} more reasons" if len(reasons) > 2 else "") + ")")
        if clauses:
            line += ("; not on " if yes else ": ") + "; ".join(clauses)
        out.append(line)
    return out


def fit(entries: Sequence[Entry], needs: Iterable[Need], budget_s: float, *, hours: float,
        skipped: dict[str, str], cap: int = 1, reserved: Sequence[tuple[str, float]] = ()) -> Fit:
    """The plan (module docstring) of `entries` (every planned (cell, repeat) in run order, priced), `needs` (the parts
    the cells could decide), `skipped` (cell id -> why this host skips it: those cells are not priced and a part that
    reads one is not decided), `cap` (the sequential repeats' cap)."""
    by_cell: dict[str, list[Entry]] = {}
    for e in entries:
        by_cell.setdefault(e.cell.id, []).append(e)
    cost = {cid: sum(e.seconds for e in es) for cid, es in by_cell.items()}
    taken: set[str] = set()
    spent = 0.0
    decided: list[Need] = []
    undecided: list[tuple[Need, str]] = []
    tier: dict[str, str] = {}
    pending = []
    for n in needs:
        gone = [c for c in n.cells if c in skipped]
        if gone:
            undecided.append((n, f"{gone[0]}{SKIPPED}{skipped[gone[0]]}"))
        elif all(c in by_cell for c in n.cells):
            pending.append(n)
    # 1. The parts, the cheapest (its cells not yet taken) first: as many parts as the hours allow.
    while pending:
        price = {id(n): sum(cost[c] for c in set(n.cells) - taken) for n in pending}
        n = min(pending, key=lambda n: (price[id(n)], CLAIM_ORDER.index(n.claim)))
        pending.remove(n)
        if spent + price[id(n)] <= budget_s:
            spent += price[id(n)]
            taken.update(n.cells)
            decided.append(n)
            tier.update({c: "claims" for c in n.cells})
        else:
            undecided.append((n, f"its cells need {duration(price[id(n)])} more at the upper bound, "
                                 f"{duration(max(budget_s - spent, 0))} left"))
    # 2. and 4. The tables' other cells in run order, then (after the repeats) the companion cells: each that fits.
    left: dict[str, str] = {}
    reps = _repeats_s(by_cell, taken, cap)
    # the cells of a part the hours cannot decide are the claims' tier, run only where a part is decided; those of a
    # part this host cannot decide (a cell of it skipped here) are table or companion cells like any other
    short = [n for n, why in undecided if SKIPPED not in why]
    for n in short:
        tier.update({c: "claims" for c in n.cells if c not in taken})
    for t in ("tables", "companion"):
        room = budget_s - (reps if t == "companion" else 0.0)
        for cid in by_cell:
            if cid in taken or cid in tier or tier_of(by_cell[cid][0].cell) != t:
                continue
            tier[cid] = t
            if spent + cost[cid] <= room:
                spent += cost[cid]
                taken.add(cid)
            else:
                left[cid] = f"left out to fit {hours:g} h: a {TIER_WORDS[t]} cell, after the claims' cells"
    for n in short:
        for c in n.cells:
            if c not in taken and c not in skipped:
                left.setdefault(c, f"left out to fit {hours:g} h: {n.name} not decided")
    first = [e for e in entries if e.cell.id in taken and tier[e.cell.id] != "companion"]
    first.sort(key=lambda e: TIERS.index(tier[e.cell.id]))   # stable: run order within a tier
    late = [e for e in entries if e.cell.id in taken and tier[e.cell.id] == "companion"]
    unknown = sorted({e.cell.id for e in entries if not e.known and e.cell.id in taken})
    undecided.sort(key=lambda nw: CLAIM_ORDER.index(nw[0].claim))
    return Fit(hours, budget_s, list(reserved), first, late, tier, left, decided, undecided,
               _repeats_s(by_cell, taken, cap), unknown)


def _repeats_s(by_cell: dict[str, list[Entry]], taken: set[str], cap: int) -> float:
    """The most the sequential repeats could add: every taken cell that has more than one repeat (a comparison's)
    to the cap, at a repeat's price."""
    total = 0.0
    for cid in taken:
        es = by_cell[cid]
        if 1 < len(es) < cap:
            total += (cap - len(es)) * es[-1].seconds
    return total


# -- as the run measures -------------------------------------------------------------------------------------------

ALL_CELLS = ("all",)   # the key every finished run counts under: the ratio where no neighbour ran


def _near(cell: Cell) -> list[tuple]:
    """The keys of a cell's neighbours, nearest first: its model, precision and framework; its model; its kind."""
    return [("mpf", cell.model, precision(cell.amp), cell.framework), ("m", cell.model), ("k", cell.kind)]


class Clock:
    """The booking's deadline and the re-plan after each cell. `price(cell, repeat)`: the planned upper price;
    `measured`: cell id -> [(seconds, planned price)] of the runs this invocation finished."""

    def __init__(self, fitted: Fit, deadline: float, now: Callable[[], float] | None = None):
        self.fit, self.deadline = fitted, deadline
        self.now = now if now is not None else (lambda: time.time())   # looked up at each call
        self.planned = {(e.cell.id, e.repeat): e.seconds for e in fitted.first + fitted.late}
        self.per_repeat = {e.cell.id: e.seconds for e in fitted.first + fitted.late}
        self.done: dict[str, list[tuple[float, float]]] = {}
        self.ratios: dict[tuple, list[float]] = {}   # a neighbour key (_near) -> measured / planned of its runs
        self.dropped: set[str] = set()

    def left_s(self) -> float:
        return self.deadline - self.now()

    def measured(self, cell: Cell, repeat: int, seconds: float | None) -> None:
        """A run that finished: its seconds against its planned price (a skipped or unpriced one teaches nothing)."""
        planned = self.planned.get((cell.id, repeat), self.per_repeat.get(cell.id))
        if seconds is not None and planned:
            self.done.setdefault(cell.id, []).append((seconds, planned))
            # measured over planned, under each of its neighbours' keys and under all: what ratio() reads
            for key in (*_near(cell), ALL_CELLS):
                self.ratios.setdefault(key, []).append(seconds / planned)

    def price(self, cell: Cell, repeat: int) -> float:
        """A run's price now: its own cell's measured median where it ran, else its planned price times the
        measured-over-planned ratio of its nearest cell that ran (module docstring), else as planned."""
        own = self.done.get(cell.id)
        if own:
            return median(s for s, _ in own)
        planned = self.planned.get((cell.id, repeat), self.per_repeat.get(cell.id, cell.timeout_s))
        return planned * self.ratio(cell)

    def ratio(self, cell: Cell) -> float:
        """The median measured-over-planned of the nearest key that has runs (kept as they finish: a re-plan
        prices every run to come, and must not walk every finished one for each)."""
        for key in (*_near(cell), ALL_CELLS):
            if self.ratios.get(key):
                return median(self.ratios[key])
        return 1.0

    def fits(self, cell: Cell, repeat: int) -> bool:
        """Whether the run may start now: its price ends before the deadline."""
        return self.now() + self.price(cell, repeat) <= self.deadline

    def replan(self, rest: Sequence[tuple[Cell, int]]) -> tuple[list[str], str | None]:
        """The runs still to come (in run order) priced again; where they no longer fit what is left, the cells to
        drop, lowest priority first, and the one line that says so (None: they fit)."""
        live = [(c, r) for c, r in rest if c.id not in self.dropped]
        need = sum(self.price(c, r) for c, r in live)
        left = self.left_s()
        if not live or need <= left:
            return [], None
        by_cell: dict[str, float] = {}
        for c, r in live:
            by_cell[c.id] = by_cell.get(c.id, 0.0) + self.price(c, r)
        order = self._drop_order(list(by_cell))
        drop: list[str] = []
        for cid in order:
            if need <= left:
                break
            drop.append(cid)
            need -= by_cell[cid]
        lost = self._lost(drop)
        # the lost parts' other cells that no part still decided reads, and that no table needs: no use running them
        kept = {c for n in self.fit.decided for c in n.cells}
        drop += [c for c in by_cell if c not in drop and c not in kept and self.fit.tier.get(c) == "claims"]
        self.dropped.update(drop)
        line = (f"re-planned: the {len(by_cell)} cells still to come are priced from this run's own cells at "
                f"{duration(sum(by_cell.values()))}, {duration(max(left, 0))} left of {self.fit.hours:g} h; left out "
                f"{len(drop)}: " + ", ".join(f"{c} ({self.fit.tier.get(c, '?')})" for c in drop[:6])
                + (f" and {len(drop) - 6} more" if len(drop) > 6 else "")
                + (f"; no longer decided: {', '.join(lost)}" if lost else ""))
        self.fit.replans.append(line)
        for c in drop:
            self.fit.left[c] = f"left out to fit {self.fit.hours:g} h when the run re-planned"
        return drop, line

    def _drop_order(self, cids: list[str]) -> list[str]:
        """Lowest priority first: companion, tables, then the claims' cells part by part, the last decided (the most
        expensive) part's first; within a tier, the last in run order first."""
        rank = {cid: i for i, cid in enumerate(cids)}
        part = {}
        for i, n in enumerate(self.fit.decided):
            for c in n.cells:
                part.setdefault(c, i)
        return sorted(cids, key=lambda c: (TIERS.index(self.fit.tier.get(c, "companion")) * -1,
                                           -part.get(c, 0), -rank[c]))

    def _lost(self, drop: list[str]) -> list[str]:
        """The decided parts a drop undecides (they are moved to the undecided)."""
        lost = []
        for n in list(self.fit.decided):
            if set(n.cells) & set(drop):
                self.fit.decided.remove(n)
                self.fit.undecided.append((n, f"left out when the run re-planned at {self.fit.hours:g} h"))
                lost.append(n.name)
        return lost


# -- prices ----------------------------------------------------------------------------------------------------------

def entries(todo: Sequence[tuple[Cell, int]], p: dict[str, Any]) -> list[Entry]:
    """Every planned run but the skipped ones, priced at the estimate's upper bound: the plan's (harness.estimate.
    runtime.plan, bounds=True) high Estimate (MindSpore at each model's largest CPU ratio where its price rests on
    PyTorch's), with the reference's time outside its cells in proportion. A run nothing measured prices: its cell's
    timeout, marked unknown."""
    high = p["bounds"]["high"][0]
    share = 1.0 + p["outside"] / max(p["cells"] + p["extra"], 1e-9)
    out = []
    for cell, r in todo:
        how = p["how"].get(cell.id)
        if how == "skipped":
            continue
        if how in (None, "none"):
            out.append(Entry(cell, r, float(cell.timeout_s), known=False))
        else:
            out.append(Entry(cell, r, (high.first if r == 0 else high.per_cell)[cell.id] * share))
    return out


def owed(platform: str, frameworks: Iterable[str]) -> list[tuple[str, float]]:
    """What a booking still owes before and around its cells, besides them (harness/preflight/host.toml [booking.*]:
    allowances, each saying what it rests on): the image build with its downloads, and the first-run compilation (on a
    GPU MindSpore's PTX JIT where its cells run, on an NPU CANN's operators). `harness estimate --hours` takes them
    off the hours; a run started by reproduce.sh has spent the build already (its clock starts with the script) and
    keeps only the compilation."""
    from harness.preflight import data

    try:
        table = data.host().get("booking", {}).get(platform, {})
    except (data.DataError, OSError):
        return []
    out = []
    if table.get("build_s"):
        out.append(("the build and its downloads", float(table["build_s"])))
    # a GPU's: MindSpore's PTX JIT (PyTorch's wheels carry their kernels); an NPU's: CANN's operators, either framework
    if table.get("first_run_s") and (platform != "cuda" or "mindspore" in set(frameworks)):
        out.append(("the first-run compilation", float(table["first_run_s"])))
    return out
