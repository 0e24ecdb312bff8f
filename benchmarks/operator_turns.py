"""Would timing by turns make Figure 5 repeat? (docs/methodology/operators.md, item 9)

The host's vCPUs change speed in phases of seconds to minutes, and a cell's processes run seconds apart, so a
MindSpore/PyTorch ratio taken from two separate processes mixes phases. This prototype keeps the three cells of one
quick-profile operator configuration (PyTorch eager, MindSpore GRAPH and PYNATIVE) alive at once, each in its own
process set up as the runner sets up that cell (the back-end's process environment for an operator cell, its
`setup`, the operator's `build`), and lets them time one block each by turns, the order rotating every round; a
worker waits on its pipe (asleep, no CPU) while another times, so two never compute at the same time. Each round
gives a ratio from blocks taken within a fraction of a second of each other; a configuration's ratio is the median
over the rounds, its 95% interval a percentile bootstrap over the rounds. It prints the operator stability figure
(0a, 0b) for this method over --sweeps sweeps, with each sweep's wall time and the load average before and after:
  0a. configurations whose ratio interval has a half-width <= 5% in every sweep (goal: >= 90%)
  0b. configurations whose ratio lies within 5% of its median over the sweeps in every sweep (goal: >= 90%)

    python benchmarks/operator_turns.py [--sweeps 3] [--rounds 12] [--json FILE]

Not the harness's method (yet): the runner still runs one process per cell and repeat (harness/config/matrix.py
schedule).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402

# a block as the sweep's (harness.scenarios.operator.ops.SWEEP_TIMING)
BLOCK = {"min_block_s": 0.1, "min_block_iters": 8}
RESAMPLES = 4000


def worker(cell_json: str) -> int:
    """One cell's operator in this process: build, warm up, size a block, then time one block per line read."""
    from harness.config.cell import Cell
    from harness.launch.inprocess import set_up
    from harness.scenarios.operator import ops as operators

    cell = Cell.from_dict(json.loads(cell_json))
    ctx = set_up(cell, until="backend").ctx   # as the child sets a cell up: CPU, repeat 0, the back-end's setup()
    impl = __import__(f"harness.scenarios.operator.{cell.framework}", fromlist=["build"])
    shape = dict(cell.spec.shape)
    run, sync = impl.build(cell.op, shape, cell.spec.dtype, cell.spec.direction, ctx,
                           operators.arrays(cell.op, shape, cell.seed))
    sizing = operators.blocked_time(run, sync, min_run_s=0.0, min_blocks=1, **BLOCK)
    n = sizing["block_size"]
    print(f"ready {n}", flush=True)
    for line in sys.stdin:
        if line.strip() != "block":
            break
        t = time.perf_counter()
        for _ in range(n):
            run()
        sync()
        print((time.perf_counter() - t) / n, flush=True)
    return 0


def start(cell) -> subprocess.Popen:
    from harness.frameworks import backend as load_backend

    env = {**os.environ, **load_backend(cell.framework).process_env("cpu", cell.kind),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(cell.to_dict())], cwd=REPO, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()   # set up and sized before the next worker starts: no two set-ups overlap
    if not line.startswith("ready"):
        raise SystemExit(f"{cell.id}: the worker did not start")
    return p


def block(p: subprocess.Popen) -> float:
    p.stdin.write("block\n")
    p.stdin.flush()
    return float(p.stdout.readline())


def configuration(cells: list, rounds: int) -> dict[str, list[float]]:
    """{framework/mode: per-iteration time of each round's block} for one configuration's cells, timed by turns."""
    workers = [(f"{c.framework}/{c.mode}", start(c)) for c in cells]
    times: dict[str, list[float]] = {k: [] for k, _ in workers}
    try:
        for r in range(rounds):
            turn = workers[r % len(workers):] + workers[:r % len(workers)]
            for key, p in turn:
                times[key].append(block(p))
    finally:
        for _, p in workers:
            p.stdin.close()
            p.wait(timeout=60)
    return times


def ratio(times: dict[str, list[float]], mode: str, seed: int) -> tuple[float, float]:
    """(median over rounds of the round's MindSpore/PyTorch throughput ratio, its 95% interval's half-width / it)."""
    r = np.asarray(times["pytorch/eager"]) / np.asarray(times[f"mindspore/{mode}"])
    rng = np.random.default_rng(seed)
    boot = np.median(r[rng.integers(0, len(r), (RESAMPLES, len(r)))], axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    mid = float(np.median(r))
    return mid, float((hi - lo) / 2 / mid)


def sweep(groups: list[list], rounds: int) -> tuple[dict[str, tuple[float, float]], float]:
    t = time.perf_counter()
    out = {}
    for i, cells in enumerate(groups):
        times = configuration(cells, rounds)
        for mode in ("graph", "pynative"):
            ms = next(c for c in cells if c.mode == mode)
            out[ms.id] = ratio(times, mode, seed=i)
    return out, time.perf_counter() - t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--only", default="operator/*")
    p.add_argument("--json", help="write every sweep's ratios and half-widths to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker)
    from harness.config import cellid, matrix

    cells = [c for c in matrix.load().expand("quick", only=a.only) if c.kind == "operator" and c.spec.dtype == "fp32"]
    by_config: dict[tuple, list] = {}
    for c in cells:
        by_config.setdefault(cellid.configuration(c.id), []).append(c)
    groups = [g for g in by_config.values() if {"eager", "graph", "pynative"} <= {c.mode for c in g}]
    print(f"before: load average {loadavg()}", flush=True)
    sweeps, walls = [], []
    for _ in range(a.sweeps):
        figs, wall = sweep(groups, a.rounds)
        sweeps.append(figs)
        walls.append(wall)
        print(f"sweep: {wall:.0f} s", flush=True)
    print(f"after: load average {loadavg()}\n")
    narrow = repeatable = 0
    for cid in sorted(sweeps[0]):
        ratios = [s[cid][0] for s in sweeps]
        halves = [s[cid][1] for s in sweeps]
        mid = median(ratios)
        dev = max(abs(x / mid - 1) for x in ratios)
        narrow += all(h <= 0.05 for h in halves)
        repeatable += dev <= 0.05
        print(f"ratio {mid:6.3f}  over sweeps ±{100 * dev:5.1f}%  half-widths "
              + " ".join(f"{100 * h:4.1f}%" for h in halves) + f"  {cid}")
    n = len(sweeps[0])
    print(f"\n0a. {narrow}/{n} configurations have a ratio interval half-width <= 5% in every sweep (goal: >= 90%)")
    print(f"0b. {repeatable}/{n} configurations have every sweep's ratio within 5% of their median over "
          f"{len(sweeps)} sweeps (goal: >= 90%)")
    print("sweep wall times: " + ", ".join(f"{w:.0f} s" for w in walls) + f" ({a.rounds} rounds; goal: <= 230 s)")
    if a.json:
        Path(a.json).write_text(json.dumps({"walls_s": walls, "sweeps": sweeps}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
