"""Operator timing quality on this host: run the quick operator sweep N times (each cell in its own
process, as always; or read N finished sweeps with --reuse) and print, with the load average before and after
and each sweep's wall time,
  0. the operator stability figure (0a, 0b), per configuration and MindSpore mode, of the MindSpore/PyTorch
     throughput ratio: a. the half-width of its 95% interval within a sweep
     (harness.results.measure.OpConfig.ratio_interval: the two
     cells'
        repeats and their blocks resampled), as a share of the ratio (goal: <= 5% for >= 90% of configurations, in
        every sweep), and
     b. how far each sweep's ratio lies from the median over the sweeps (goal: within 5% for >= 90%);
     the sweep's wall time (goal: at most 2 x 115 s);
  1. the coefficient of variation of each configuration's median time over the N sweeps, and
  2. with --autorange, for PyTorch cells, the harness's median against torch.utils.benchmark.Timer.blocked_autorange
     on the same operator and inputs (goal: within 5%).

    python benchmarks/operator_stability.py [--sweeps 3] [--only 'operator/*'] [--keep DIR] [--reuse DIR ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import cv, loadavg  # noqa: E402


def sweep(out: Path, only: str) -> float:
    """One quick operator sweep into `out`; its wall time."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--profile", "quick", "--out",
                    str(out), "--synthetic", "--only", only], cwd=REPO, check=False, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def results(out: Path) -> dict[str, list[dict]]:
    """A finished sweep's ok results, per cell (one per repeat)."""
    res = subprocess.run([sys.executable, "-m", "harness", "results", str(out), "--json"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    cells: dict[str, list[dict]] = {}
    for r in json.loads(res):
        if r["status"] == "ok":
            cells.setdefault(r["cell"], []).append(r)
    return cells


def ratio_figures(run: dict[str, list[dict]]) -> dict[str, tuple[float, float | None]]:
    """{configuration and MindSpore mode: (ratio, interval half-width / ratio)} for one sweep, as the report and the
    claims take them: the ratio of the medians over the repeats (harness.results.measure.operator_ratios), its interval
    from the repeats (processes) and their blocks resampled (OpConfig.ratio_interval)."""
    from harness.results import measure

    index = measure.summarise(r for rs in run.values() for r in rs)
    out = {}
    for cfg in measure.operator_ratios(index):
        for key, ms in cfg.cells.items():
            mode = key.split("/")[1]
            if not key.startswith("mindspore/") or (ratio := cfg.ratio(mode)) is None:
                continue
            iv = cfg.ratio_interval(mode)
            out[f"{ms.cell.replace('mindspore/', '')} ({key})"] = (ratio, None if iv is None else
                                                                  measure.relative_half_width(iv, ratio))
    return out


ROUNDS = 3


def paired_timings(result: dict) -> tuple[float, float]:
    """(harness median, blocked_autorange median) for the operator the harness timed, in one fresh process (as the
    cell was), the two timers taking turns ROUNDS times: the host's slow phases then hit both alike, and the
    comparison is of the timing methods, not of two moments."""
    out = subprocess.run([sys.executable, __file__, "--paired", json.dumps(result)], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    harness_s, autorange_s = out.strip().splitlines()[-1].split()
    return float(harness_s), float(autorange_s)


def _paired_here(result: dict) -> tuple[float, float]:
    import os

    cores = result.get("settings", {}).get("cpu_cores")
    if cores:  # the cores the cell ran on (harness.scenarios.operator.ops.cpu_cores), before torch starts its threads
        os.sched_setaffinity(0, cores)
    import torch
    import torch.utils.benchmark as tb

    from harness.config.cell import Cell
    from harness.config.context import CellContext
    from harness.config.spec import OperatorSpec
    from harness.scenarios.operator import ops as operators
    from harness.scenarios.operator.ops import pytorch as impl

    cell = Cell(id=result["cell"], kind="operator", op=result["op"], framework="pytorch", mode=result["mode"],
                amp="off", devices=1, repeats=1, timeout_s=0, seed=result["seed"],
                spec=OperatorSpec(title=result["op"], shape=result["shape"], dtype=result["dtype"],
                                  direction=result["direction"]))
    ctx = CellContext(cell=cell, platform="cpu", repeat=0, data_folder=None, synthetic=True)
    run, sync = impl.build(result["op"], result["shape"], result["dtype"], result["direction"], ctx,
                           operators.arrays(result["op"], result["shape"], result["seed"]))
    # Timer defaults to one thread; the harness's cells run with the thread count recorded in their settings.
    torch.set_num_threads(result.get("settings", {}).get("threads") or torch.get_num_threads())
    timer = tb.Timer(stmt="run()", globals={"run": run}, num_threads=torch.get_num_threads())
    ours, theirs = [], []
    for _ in range(ROUNDS):
        ours.append(operators.blocked_time(run, sync, **operators.SWEEP_TIMING)["median_s"])
        theirs.append(timer.blocked_autorange(min_run_time=1.0).median)
    return median(ours), median(theirs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--only", default="operator/*")
    p.add_argument("--keep", help="keep the sweeps' run folders under this folder")
    p.add_argument("--reuse", nargs="+", metavar="DIR", help="read these finished sweeps instead of running new ones")
    p.add_argument("--autorange", action="store_true", help="also compare PyTorch cells with blocked_autorange")
    p.add_argument("--paired", help=argparse.SUPPRESS)  # internal: one result's paired timings, in this process
    a = p.parse_args()
    if a.paired:
        print(*_paired_here(json.loads(a.paired)))
        return 0
    print(f"before: load average {loadavg()}", flush=True)
    if a.reuse:
        folders, walls = [Path(d) for d in a.reuse], []
    else:
        base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="opstab-"))
        folders = [base / f"sweep{i}" for i in range(a.sweeps)]
        walls = [sweep(folder, a.only) for folder in folders]
        print("sweep wall times: " + ", ".join(f"{w:.0f} s" for w in walls) + " (goal: <= 230 s, 2 x 115 s)")
    runs = [results(folder) for folder in folders]
    print(f"after: load average {loadavg()}\n")

    # 0. the operator stability figure (0a, 0b): the MindSpore/PyTorch ratio's interval within a sweep, and its
    # spread over the sweeps
    figs = [ratio_figures(run) for run in runs]
    configs = sorted(set.intersection(*(set(f) for f in figs)))
    narrow = repeatable = inside = 0
    for c in configs:
        ratios = [f[c][0] for f in figs]
        mid = median(ratios)
        dev = max(abs(r / mid - 1) for r in ratios)
        halves = [f[c][1] for f in figs]
        ok_half = all(h is not None and h <= 0.05 for h in halves)
        narrow += ok_half
        repeatable += dev <= 0.05
        # 0c: every sweep's ratio inside every other sweep's interval (ratio ± half-width)
        inside += all(h is not None and abs(r2 / r - 1) <= h for r, h in zip(ratios, halves, strict=True)
                      for r2 in ratios)
        print(f"ratio {mid:6.3f}  over sweeps ±{100 * dev:5.1f}%  half-widths "
              + " ".join("  n/a" if h is None else f"{100 * h:4.1f}%" for h in halves) + f"  {c}")
    n = max(len(configs), 1)
    print(f"\n0a. {narrow}/{len(configs)} configurations ({100 * narrow / n:.0f}%) have a ratio interval half-width "
          f"<= 5% in every sweep (goal: >= 90%)")
    each = [sum(f[c][1] is not None and f[c][1] <= 0.05 for c in configs) for f in figs]
    print(f"    each sweep: {', '.join(f'{k}/{len(configs)}' for k in each)} within ±5%")
    print(f"0b. {repeatable}/{len(configs)} configurations ({100 * repeatable / n:.0f}%) have every sweep's ratio "
          f"within 5% of their median over {len(runs)} sweeps (goal: >= 90%)")
    print(f"0c. {inside}/{len(configs)} configurations ({100 * inside / n:.0f}%) have every sweep's ratio inside every "
          f"other sweep's 95% interval")

    # 1. each cell's median time over the sweeps
    cells = sorted(c for c in set.intersection(*(set(r) for r in runs)) if c.startswith("operator/"))  # quick runs
    cvs = {c: cv([median(x.get("fast_s", x["median_s"]) for x in r[c]) for r in runs]) for c in cells}
    within = sum(v <= 0.05 for v in cvs.values())
    print(f"\n1. {within}/{len(cvs)} cells ({100 * within / max(len(cvs), 1):.0f}%) have a CV of their median time "
          f"<= 5% over {len(runs)} sweeps; the worst:")
    for c, v in sorted(cvs.items(), key=lambda kv: -kv[1])[:8]:
        print(f"   CV {100 * v:5.1f}%  {c}")
    if not a.autorange:
        return 0
    agree, rows = 0, []
    for c in cells:
        r = runs[0][c][0]
        if r["framework"] != "pytorch":
            continue
        ours, ref = paired_timings(r)
        diff = ours / ref - 1
        agree += abs(diff) <= 0.05
        rows.append((diff, c, ours, ref))
    for diff, c, h, ref in sorted(rows, key=lambda t: -abs(t[0])):
        print(f"{100 * diff:+6.1f}%  harness {1e3 * h:9.4f} ms  blocked_autorange {1e3 * ref:9.4f} ms  {c}")
    print(f"\n2. {agree}/{len(rows)} PyTorch configurations agree with blocked_autorange within 5% (both timers in one "
          f"fresh process, taking turns {ROUNDS} times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
