"""Estimate a profile's wall time from a recorded run: each cell's recorded time (elapsed_s of its ok repeats, their
median) times the repeats the matrix now gives it (claim_repeats, or --repeats N). An estimate from recorded times,
not a run: the host's load, data preparation and a cell that never reached its target change it.

    python tools/estimate_wall.py docs/target/run-2026-11-23-cpu --profile target [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.config import matrix  # noqa: E402
from harness.estimate import runtime as estimate_mod  # noqa: E402


def estimate(run: Path, profile: str, repeats: int | None = None) -> list[dict]:
    """Per cell of the profile: its recorded seconds per repeat (None where the run lacks it) and its repeats."""
    times = estimate_mod.per_cell(run)
    rows = []
    for cell in matrix.load().expand(profile, repeats=repeats):
        per = times[cell.id].median if cell.id in times else None
        rows.append({"cell": cell.id, "repeats": cell.repeats, "recorded_s": per,
                     "estimate_s": per * cell.repeats if per is not None else None})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path)
    p.add_argument("--profile", default="target")
    p.add_argument("--repeats", type=int)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = estimate(a.run, a.profile, a.repeats)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        rec = "not in the run" if r["recorded_s"] is None else f"{r['recorded_s']:8.1f} s x {r['repeats']}"
        est = "" if r["estimate_s"] is None else f" = {r['estimate_s']:8.1f} s"
        print(f"{r['cell']:48} {rec}{est}")
    known = [r for r in rows if r["estimate_s"] is not None]
    total = sum(r["estimate_s"] for r in known)
    once = sum(r["recorded_s"] for r in known)
    print(f"estimate from the times recorded in {a.run} (not a run): {total:,.0f} s ({total / 3600:.2f} h) for "
          f"{sum(r['repeats'] for r in known)} repeats of {len(known)} cells (one repeat each: {once:,.0f} s)"
          + (f"; {len(rows) - len(known)} cells not in that run" if len(known) < len(rows) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
