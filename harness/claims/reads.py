"""Which cells each claim's part reads: what a run must measure for a part to be decided (harness.estimate.fit plans a
booking by it). Read from the rules' own definitions (harness.claims.models's rows, the fair baselines, the operator
groups), so that a rule changed there changes what a booking plans for.

    needs(cells) -> [Need]: every part a profile's cells could decide, each with the ids of the cells it reads

A part is a claim on one subject: C1-C4 per model (C1 on the paper's three, C2-C4 on every model the profile trains),
C5 per model, AMP level and device count, O1 per operator, O2 on BatchNorm2d, O3 on Conv2d. C1 and C2 read the two
frameworks' fair baselines (C1 their throughput and time to target); C3 each framework's AMP levels against its AMP
off; C4 MindSpore PyNative against GRAPH and PyTorch eager; C5 both frameworks' scaling cells with the 1-device cells of
the same AMP level; O1-O3 every configuration of their operator in PyTorch eager and MindSpore GRAPH (PYNATIVE where no
GRAPH cell is planned).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.claims.models import C1_THROUGHPUT, C3_ROWS, C4_ROWS
from harness.claims.paper import BASELINE, OP_MS_MODES, OP_PT_MODE, PAPER_FASTER
from harness.config import cellid
from harness.config.cell import Cell

CLAIM_ORDER = ("C1", "C2", "C3", "C4", "C5", "O1", "O2", "O3")
OPERATOR_CLAIMS = {"O1": None, "O2": "batchnorm2d", "O3": "conv2d"}   # None: every operator


@dataclass(frozen=True)
class Need:
    """One part of a claim and the cells it reads (ids, in the profile's order)."""
    claim: str
    subject: str            # a model, "gcn at 2 devices, AMP off", or an operator
    cells: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.claim} on {self.subject}"


def _settings(rows) -> set[tuple[str, str, str]]:
    return {s for row in rows for s in (row.a, row.b)}


# (framework, mode, amp) of the 1-device cells each model claim reads.
_BASE = {(fw, *BASELINE[fw]) for fw in BASELINE}
MODEL_SETTINGS = {"C1": _BASE | _settings([C1_THROUGHPUT]), "C2": _BASE, "C3": _settings(C3_ROWS),
                  "C4": _settings(C4_ROWS)}


def needs(cells: Iterable[Cell]) -> list[Need]:
    """Every part the cells could decide, in claim order, each with the cells it reads."""
    cells = list(cells)
    ids = {c.id for c in cells}
    models = list(dict.fromkeys(c.model for c in cells if c.kind == "model" and c.model))
    out: list[Need] = []
    for claim in ("C1", "C2", "C3", "C4"):
        for m in models:
            if claim == "C1" and m not in PAPER_FASTER:
                continue
            want = [cellid.model_id(m, fw, mode, amp) for fw, mode, amp in sorted(MODEL_SETTINGS[claim])]
            if all(w in ids for w in want):
                out.append(Need(claim, m, tuple(w for w in (c.id for c in cells) if w in want)))
    out += _scaling(cells, ids)
    out += _operators(cells)
    return out


def _scaling(cells: list[Cell], ids: set[str]) -> list[Need]:
    """C5: per model, AMP level and device count, both frameworks' scaling cells (their baseline mode) and the 1-device
    cells of the same setting they are divided by."""
    out = []
    combos = dict.fromkeys((c.model, c.amp, c.devices, c.nodes) for c in cells if c.kind == "scaling")
    for model, amp, n, nodes in combos:
        want = []
        for fw, (mode, _) in BASELINE.items():
            want += [cellid.model_id(model, fw, mode, amp, n, nodes), cellid.model_id(model, fw, mode, amp)]
        if all(w in ids for w in want):
            out.append(Need("C5", f"{model} at {cellid.devices_label(n, nodes)} devices, AMP {amp}", tuple(want)))
    return out


def _operators(cells: list[Cell]) -> list[Need]:
    """O1 per operator, O2 on BatchNorm2d, O3 on Conv2d: their configurations' PyTorch eager cells and MindSpore's in
    the first of OP_MS_MODES the profile plans."""
    ops = [c for c in cells if c.kind == "operator"]
    ms_modes = {c.mode for c in ops if c.framework == "mindspore"}
    ms_mode = next((m for m in OP_MS_MODES if m in ms_modes), None)
    if ms_mode is None:
        return []
    read = [c for c in ops if (c.framework, c.mode) in (("pytorch", OP_PT_MODE), ("mindspore", ms_mode))]
    names = list(dict.fromkeys(c.op for c in read if c.op))
    out = []
    for claim, only in OPERATOR_CLAIMS.items():
        for op in names if only is None else [only]:
            mine = tuple(c.id for c in read if c.op == op)
            if mine:
                out.append(Need(claim, op, mine))
    return out
