"""Does this host's CPU keep its speed? A pure-Python loop (no memory traffic, no framework) timed in blocks of a few
ms on each core in turn, alone and with the other core spinning, for --seconds each; printed per run: the fast blocks
(5th percentile), the median, the 90th percentile, the share of blocks over 1.2x the 5th percentile ("slow"), and how
long the slow and fast phases last (runs of consecutive blocks). On a host whose cores keep their speed the share is
near 0; on the 2-core machine of docs/methodology/operators.md blocks ran at two speeds about 1.7x apart, in phases
from a few ms to whole runs of seconds, with or without the other core busy: the phases come from outside the
machine.

    python benchmarks/host_phases.py [--seconds 6]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median, quantiles

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402


def loop() -> None:
    s = 0
    for i in range(20000):
        s += i


def series(core: int, seconds: float) -> list[float]:
    """Per-block ms of loop() x 5 on `core` for `seconds`."""
    os.sched_setaffinity(0, {core})
    for _ in range(20):
        loop()
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        for _ in range(5):
            loop()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def runs(slow: list[bool]) -> tuple[list[int], list[int]]:
    """Lengths of the runs of consecutive slow and fast blocks."""
    out: tuple[list[int], list[int]] = ([], [])
    n, cur = 0, None
    for s in [*slow, None]:
        if s == cur:
            n += 1
            continue
        if cur is not None:
            out[0 if cur else 1].append(n)
        cur, n = s, 1
    return out


def summary(name: str, ms: list[float]) -> str:
    fastest = quantiles(ms, n=20)[0]   # the 5th percentile: one lucky block does not set the scale
    slow = [x > 1.2 * fastest for x in ms]
    s_runs, f_runs = runs(slow)
    block = median(ms)
    return (f"{name}: {len(ms)} blocks of ~{block:.2f} ms; fast (5th percentile) {fastest:.3f}, median "
            f"{median(ms):.3f}, p90 {quantiles(ms, n=10)[8]:.3f} ms; slow (> 1.2x fast) {sum(slow) / len(ms):.0%}; "
            f"longest slow phase {max(s_runs, default=0) * block:.0f} ms, "
            f"longest fast {max(f_runs, default=0) * block:.0f} ms")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--child", nargs=2, type=float, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(" ".join(f"{x:.4f}" for x in series(int(a.child[0]), a.child[1])))
        return 0
    cores = sorted(os.sched_getaffinity(0))
    print(f"before: load average {loadavg()}; cores {cores}")
    for core in cores[:2]:
        for other_busy in (False, True):
            spin = None
            if other_busy and len(cores) > 1:
                other = next(c for c in cores if c != core)
                code = (f"import os, time; os.sched_setaffinity(0, {{{other}}}); end = time.time() + {a.seconds + 2}"
                        "\nwhile time.time() < end: pass")
                spin = subprocess.Popen([sys.executable, "-c", code])
                time.sleep(0.3)
            out = subprocess.run([sys.executable, __file__, "--child", str(core), str(a.seconds)],
                                 capture_output=True, text=True, check=True).stdout
            if spin is not None:
                spin.kill()
                spin.wait()
            label = f"core {core}, " + ("the other core spinning" if spin is not None else "the other core idle")
            print(summary(label, [float(x) for x in out.split()]), flush=True)
    print(f"after: load average {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
