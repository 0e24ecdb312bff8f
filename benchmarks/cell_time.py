"""Where a run's cells spend their time, read from a run folder (no cell is run): per group of cells (a model's
cells, scaling, operators, inference, passes), the runs, their summed process time and, for training cells, its
parts from each event log: start-up before the log's init_start and teardown after its last event ("outside"),
init_start to run_start (framework set-up), run_start to the first epoch ("prepare": data, network, optimiser),
training epochs, evaluations, the test-set evaluation after run_stop, and the rest (between epochs).

    python benchmarks/cell_time.py RUN [RUN ...]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import cellid
from harness.results import eventlog  # noqa: E402
from harness.results.store import RunStore  # noqa: E402

PARTS = ("outside", "init", "prepare", "train", "eval", "test", "rest")


def phases(events: list[dict], elapsed: float) -> dict[str, float]:
    """A training cell's seconds per part (PARTS), from its event log and the runner's elapsed_s."""
    at = defaultdict(list)
    for e in events:
        at[e["key"]].append((e.get("metadata") or {}).get("elapsed_s", 0.0))
    last = max((t for ts in at.values() for t in ts), default=0.0)

    def span(start: str, stop: str) -> float:
        return sum(b - a for a, b in zip(at[start], at[stop], strict=False))

    out = {"outside": elapsed - last + (at["init_start"] or [0.0])[0],
           "init": (at["run_start"] or [0.0])[0] - (at["init_start"] or [0.0])[0],
           "prepare": (at["epoch_start"] or at["run_stop"] or [0.0])[0] - (at["run_start"] or [0.0])[0],
           "train": span("epoch_start", "epoch_stop"), "eval": span("eval_start", "eval_stop"),
           "test": last - (at["run_stop"] or [last])[0]}
    out["rest"] = elapsed - sum(out.values())
    return out


def group(cell: str) -> str:
    kind = cell.split("/", 1)[0]
    return cellid.parse(cell).model if kind == "model" else kind


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for run in map(Path, argv):
        rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for r in RunStore(run).results():
            g, elapsed = group(r["cell"]), r.get("elapsed_s") or 0.0
            rows[g]["runs"] += 1
            rows[g]["elapsed"] += elapsed
            log = run / "cells" / r["cell"] / f"r{r['repeat']}{eventlog.SUFFIX}"
            if r.get("kind") == "model" and log.is_file():
                for k, v in phases(eventlog.read(log), elapsed).items():
                    rows[g][k] += v
        print(f"{run}: seconds summed over the runs of each group")
        print(f"{'group':12} {'runs':>5} {'elapsed':>8} " + " ".join(f"{p:>8}" for p in PARTS))
        for g, row in sorted(rows.items(), key=lambda kv: -kv[1]["elapsed"]):
            print(f"{g:12} {row['runs']:5.0f} {row['elapsed']:8.1f} " + " ".join(
                f"{row[p]:8.1f}" if p in row else f"{'':>8}" for p in PARTS))
        total = sum(row["elapsed"] for row in rows.values())
        print(f"{'all':12} {sum(row['runs'] for row in rows.values()):5.0f} {total:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
