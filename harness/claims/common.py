"""The pieces every rule is made of: a Part (one comparison), a Claim, the lookup of a cell in the results indexed per
cell (harness.results.measure.Repeats), the wording of numbers and settings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.claims.paper import (
    FW_NAMES,
    INCONCLUSIVE,
    MODEL_NAMES,
    PAPER_MODELS,
    SETTING_NAMES,
    TIE_RATIO,
)
from harness.config import cellid
from harness.results import arith
from harness.results.measure import LEVEL, Repeats, interval_text

SUPPORTS, CONTRADICTS, NOT_MEASURED = "supports", "contradicts", "not measured"   # outcome of one Part (or
# INCONCLUSIVE: its ratio's interval reaches across an edge of the tie band)
Interval = tuple[float, float | None]   # harness.results.measure.ratio_interval's: upper end None where it is +inf


@dataclass
class Part:
    """One comparison inside a claim (one model, one framework, one direction...)."""

    name: str
    outcome: str            # supports | contradicts | inconclusive | not measured
    detail: str             # the measured numbers, or why it was not measured
    cells: list[str] = field(default_factory=list)
    interval: Interval | None = None   # the ratio's, from the repeats; None with one repeat a side


@dataclass
class Claim:
    id: str
    title: str              # the paper's conclusion, short
    paper_evidence: str     # what the paper reported
    verdict: str            # one of VERDICTS
    reason: str             # why this verdict; for `not measured`, which cells are missing or not ok
    evidence: list[str] = field(default_factory=list)   # measured numbers, one line per comparison
    cells: list[str] = field(default_factory=list)      # ids of the cells whose results were used
    caveats: list[str] = field(default_factory=list)    # its own; the run's: harness.claims.run_caveats
    parts: list[Part] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Its fields; a part's `interval` only where it has one (one-repeat results read as they always did)."""
        d = asdict(self)
        for part in d["parts"]:
            if part["interval"] is None:
                del part["interval"]
        return d


def platforms(results: Iterable[dict[str, Any]]) -> list[str]:
    return sorted({r["platform"] for r in results if r.get("platform")})


def _select(results: list[dict[str, Any]], platform: str | None) -> tuple[list[dict[str, Any]], str | None]:
    found = platforms(results)
    if platform is None:
        if len(found) > 1:
            raise ValueError(f"results from several platforms ({', '.join(found)}): pass platform=, or use "
                             f"evaluate_by_platform(); numbers from different hosts are never compared")
        platform = found[0] if found else None
    # Results without a platform (corrupt-file stand-ins) belong to the run only when it has one platform.
    keep_unknown = len(found) <= 1
    return [r for r in results if r.get("platform") == platform or (keep_unknown and not r.get("platform"))], platform


# -- helpers --------------------------------------------------------------------------------------------------
def _model_id(model: str, framework: str, mode: str, amp: str, devices: int = 1, nodes: int = 1) -> str:
    return cellid.model_id(model, framework, mode, amp, devices, nodes)


def _parsed(cell: str) -> cellid.CellId | None:
    try:
        return cellid.parse(cell)
    except ValueError:
        return None


def _lookup(index: dict[str, Repeats], cell: str) -> tuple[Repeats | None, str | None]:
    s = index.get(cell)
    if s is None:
        return None, f"{cell} not in the results"
    if not s.ok:
        return None, s.why_not()
    return s, None


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def _side(ratio: float) -> str:
    """'above' / 'below' / 'tie' for a ratio of two positive numbers."""
    return arith.side(ratio, TIE_RATIO)


def _setting(framework: str, mode: str) -> str:
    return f"{FW_NAMES.get(framework, framework)} {SETTING_NAMES.get(mode, mode)}"


def _mname(model: str) -> str:
    return MODEL_NAMES.get(model, model)


def _models(index: dict[str, Repeats]) -> list[str]:
    ids = [(s, _parsed(s.cell)) for s in index.values()]
    seen = {s.first.get("model") or c.model for s, c in ids if c is not None and c.kind in ("model", "scaling")}
    return list(PAPER_MODELS) + sorted(seen - set(PAPER_MODELS))


def interval_side(interval: Interval) -> str:
    """Where an interval lies against the tie band: 'below' / 'tie' / 'above' where both ends agree (an infinite upper
    end is above), INCONCLUSIVE where they lie on different sides (across an edge of the band). The one rule of the
    claims, the operator claims and the sequential repeats (harness.launch.sequential)."""
    lo, hi = interval
    sides = {_side(lo), "above" if hi is None else _side(hi)}
    return sides.pop() if len(sides) == 1 else INCONCLUSIVE


def _compare(name: str, cells: list[str], ratio: float, expect: str, text: str,
             interval: Interval | None = None) -> Part:
    """A part that supports the claim when `ratio` lies on the `expect` side of 1 (beyond the tie margin). With an
    `interval` (harness.results.measure.ratio_interval) it is decided by the interval's two ends: both on one side, that
    side; on different sides (across an edge of the tie band) INCONCLUSIVE, neither supporting nor contradicting."""
    side = _side(ratio)
    ends = ""
    if interval is not None:
        side = interval_side(interval)
        ends = f"; {LEVEL:.0%} interval {interval_text(interval)}"
    verdict = {expect: SUPPORTS, INCONCLUSIVE: INCONCLUSIVE}.get(side, CONTRADICTS)
    note = (f", a tie (within {TIE_RATIO - 1:.0%})" if side == "tie" else
            f", across the ±{TIE_RATIO - 1:.0%} tie band" if side == INCONCLUSIVE else "")
    return Part(name, verdict, f"{text}{ends}{note} — {verdict}", cells, interval)


def _missing(name: str, why: list[str] | str) -> Part:
    why = [why] if isinstance(why, str) else why
    return Part(name, NOT_MEASURED, f"{name}: not measured — {'; '.join(why)}")


