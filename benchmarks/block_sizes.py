"""Does the length of an operator's block change its per-iteration time, when another process runs between blocks?
(docs/methodology/operators.md, item 15)

Timed by turns, a cell's process times one block, then sleeps while its partner times one: the partner's work evicts
this process's data from the caches and its threads sleep. One operator process, set up as the runner sets one up
(benchmarks/memory_phases.py), times blocks of each of --sizes iterations in turn, each after a stand-in for the
partner's block (a read of a 32 MiB buffer, then a 20 ms sleep), with and without one untimed iteration before the
block (what turn_time does now); a line a second per variant: the 10th percentile of each size's per-iteration time.
A cost paid once a block weighs n times less in a block of n iterations, so a process whose block was sized short
runs slower per iteration.

    python benchmarks/block_sizes.py [--cell GLOB] [--sizes 6,12,24] [--seconds 6]

Timings: run it with nothing else on the host; it prints the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402
from benchmarks.memory_phases import DEFAULT, operator_process, quick_operator_cell, start  # noqa: E402

PARTNER_BYTES = 32 << 20   # larger than the 2-core machine's L2 and its share of L3
PARTNER_SLEEP_S = 0.02     # a partner's block: at least SWEEP_TIMING's 0.02 s


def child(cell_json: str, seconds: float, cores: list[int], sizes: list[int], warm: bool) -> None:
    from harness.launch.child import leave_now
    from harness.scenarios.operator import ops as operators

    run, sync, _ = operator_process(cell_json, cores)
    for _ in range(3):
        run()
    sync()
    partner = np.ones(PARTNER_BYTES // 4, np.float32)
    begin = time.perf_counter()
    while time.perf_counter() - begin < seconds:
        times: dict[int, list[float]] = {n: [] for n in sizes}
        second = time.perf_counter()
        while time.perf_counter() - second < 1.0:
            for n in sizes:
                partner.sum()
                time.sleep(PARTNER_SLEEP_S)
                if warm:
                    run()
                    sync()
                times[n].append(operators.one_block(run, sync, n))
        print(json.dumps({str(n): float(np.percentile(v, 10)) for n, v in times.items()}), flush=True)
    leave_now(0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", default=DEFAULT)
    p.add_argument("--sizes", default="6,12,24")
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--probe", help=argparse.SUPPRESS)
    p.add_argument("--cores", help=argparse.SUPPRESS)
    p.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    try:
        sizes = [int(n) for n in a.sizes.split(",")]
        if not sizes or min(sizes) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --sizes {a.sizes} is not a list of block sizes; give iterations per block, e.g. 6,12,24",
              file=sys.stderr)
        return 2
    if a.probe:
        child(a.probe, a.seconds, [int(c) for c in a.cores.split(",")], sizes, a.warm)
        return 0
    found = quick_operator_cell(a.cell)
    if found is None:
        return 2
    cell, cores = found
    print(f"before: load average {loadavg()}", flush=True)
    print(f"{cell.id} on core {cores}; per-iteration time (10th percentile over a second), blocks of {sizes} "
          "iterations, each after a stand-in for a partner's block", flush=True)
    ok = True
    for warm in (False, True):
        print("with one untimed iteration before each block" if warm else "block timed as the turn comes", flush=True)
        proc = start(cell, a.seconds, cores, __file__, ("--sizes", a.sizes) + (("--warm",) if warm else ()))
        rows = [json.loads(line) for line in proc.stdout]
        for row in rows:
            print("  " + "  ".join(f"{n:>3} it {row[str(n)] * 1e6:8.0f} us" for n in sizes), flush=True)
        if rows:
            first, last = str(sizes[0]), str(sizes[-1])
            ratio = [r[first] / r[last] for r in rows]
            print(f"  {sizes[0]}-iteration blocks against {sizes[-1]}: {min(ratio):.3f}-{max(ratio):.3f}x", flush=True)
        ok = proc.wait() == 0 and ok
    print(f"after: load average {loadavg()}")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
