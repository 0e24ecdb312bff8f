"""The docs' block of the estimate held against wall times (harness.estimate.heldout): per case, every cell's estimate,
its range and what it measured, and the totals, with the bounds a test holds them to.

    held_out(runs) -> Markdown
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.docs.render import Run
from harness.estimate import heldout
from harness.results.units import duration


def _s(x: float | None) -> str:
    return "not measured" if x is None else f"{x:.1f} s"


def held_out(runs: Sequence[Run]) -> str:
    folder = runs[0].path.parent
    lo, hi = heldout.CELL_BOUND
    out = [f"Bounds: a cell priced from a cell of its model that does not stop at an unknown target, measured within "
           f"{lo:g}x to {hi:g}x of its estimate; a total without such an open cell within ±{heldout.TOTAL_BOUND:.0%}; "
           f"an open cell (it stops at its target, and no measured cell says when) and a total with one, inside its "
           f"range. `tests/test_estimate_heldout.py` fails where one is not."]
    for case in heldout.CASES:
        c = heldout.compare(case, folder)
        out += ["", f"**{case.title[0].upper() + case.title[1:]}** (`docs/runs/{case.reference}` for "
                    f"`docs/runs/{case.measured}`, both on {c.device}):", "",
                "| cell | priced from | runs | estimate | range | measured | measured / estimate |",
                "|---|---|---|---|---|---|---|"]
        for r in c.rows:
            ratio = f"{r.ratio:.2f}" if r.ratio is not None else "—"
            out.append(f"| `{r.cell}` | {r.basis}{' (open: stops at its target)' if r.open else ''} | {r.runs} | "
                       f"{'at most ' if r.open else ''}{_s(r.estimate_s)} | "
                       f"{f'{_s(r.low_s)} to {_s(r.high_s)}' if r.high_s > r.low_s else 'none'} | {_s(r.measured_s)} | "
                       f"{ratio} |")
        what = "the run's wall time" if c.whole else "the cells' own seconds"
        out.append(f"| **total** ({what}) | | {sum(r.runs for r in c.rows)} | "
                   f"{'at most ' if c.open else ''}{duration(c.estimate_s)} | "
                   + (f"{duration(c.low_s)} to {duration(c.high_s)}" if c.high_s > c.low_s else "none")
                   + f" | {duration(c.measured_s)} | "
                   f"{c.measured_s / c.estimate_s:.2f} |")
    return "\n".join(out)
