"""What the sequential-repeats rule (harness/launch/sequential.py) does with known ratios: per true ratio and noise, the
share of wrong conclusive verdicts, of inconclusive ones and the mean repeats a side, for the rule (2 repeats, then
one more while not settled, up to the cap) beside fixed designs of 2 and of `cap` repeats (the quick and target
profiles' designs before the rule). `--calibrate` recomputes harness.launch.sequential.WIDEN.

    python benchmarks/sequential_repeats.py [--trials 1000] [--cap 3] [--calibrate]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.launch import sequential  # noqa: E402
from harness.results import measure

RATIOS = (0.4, 0.9, 0.97, 1.0, 1.03, 1.1, 1.3, 2.9)
CVS = (0.05, 0.10, 0.20)


def calibrate(n: int, draws: int, seed: int = 11) -> float:
    """The widening factor at n repeats a side: the (1 - EARLY_ERROR) quantile of the factor that would have put a
    ratio whose truth lies on a band edge wholly on the wrong side of it (log-normal noise; scale-free)."""
    rng = np.random.default_rng(seed)
    crit = []
    for _ in range(draws):
        a, b = rng.lognormal(0, 1, n), rng.lognormal(0, 1, n)
        lo, hi = measure.ratio_interval(measure.Sample(tuple(a)), measure.Sample(tuple(b)))
        centre, half = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / 2
        crit += [abs(centre) / half if half > 0 else math.inf, 0.0]   # the wrong side is one of two
    return float(np.quantile(crit, 1 - sequential.EARLY_ERROR))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--cap", type=int, default=3)
    p.add_argument("--calibrate", action="store_true")
    a = p.parse_args(argv)
    if a.calibrate:
        for n in (2, 3, 4, 5, 6):
            print(f"WIDEN[{n}] = {calibrate(n, 6000):.2f}")
        return 0
    print(f"{a.trials} trials a setting; wrong = a conclusive verdict on another side of the ±5% tie band than the "
          f"true ratio; seq = 2 repeats, then one more while not settled, up to {a.cap}")
    print(f"{'cv':>5} {'ratio':>6} | {'fixed 2: wrong inc':>19} | {f'fixed {a.cap}: wrong inc':>19} | "
          f"{'seq: wrong inc repeats':>23}")
    for cv in CVS:
        for r in RATIOS:
            f2 = sequential.simulate(r, cv, 2, 2, a.trials, seed=1)
            fc = sequential.simulate(r, cv, a.cap, a.cap, a.trials, seed=2, sequential=False)
            sq = sequential.simulate(r, cv, 2, a.cap, a.trials, seed=3)
            print(f"{cv:5.2f} {r:6.2f} | {f2['wrong']:9.3f} {f2['inconclusive']:9.3f} | {fc['wrong']:9.3f} "
                  f"{fc['inconclusive']:9.3f} | {sq['wrong']:7.3f} {sq['inconclusive']:7.3f} {sq['mean_repeats']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
