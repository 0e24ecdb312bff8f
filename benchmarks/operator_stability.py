"""Operator timing quality on this host: run the quick operator sweep N times (each cell in its own
process, as always) and print
  1. the coefficient of variation of each configuration's median over the N sweeps (goal: <= 5% for
     >= 90% of configurations), and
  2. for PyTorch cells, the harness's median against torch.utils.benchmark.Timer.blocked_autorange on
     the same operator and inputs (goal: within 5%).

    python benchmarks/operator_stability.py [--sweeps 3] [--only 'operator/*'] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import mean, pstdev

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def sweep(out: Path, only: str) -> dict[str, dict]:
    subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--profile", "quick", "--out",
                    str(out), "--synthetic", "--only", only], cwd=REPO, check=False, stderr=subprocess.DEVNULL)
    res = subprocess.run([sys.executable, "-m", "harness", "results", str(out), "--json"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return {r["cell"]: r for r in json.loads(res) if r["status"] == "ok"}


def autorange_median(result: dict) -> float:
    """torch.utils.benchmark's own estimate for the operator the harness timed."""
    import torch
    import torch.utils.benchmark as tb

    from harness import operators
    from harness.context import CellContext
    from harness.matrix import Cell
    from harness.operators import pytorch as impl

    cell = Cell(id=result["cell"], kind="operator", op=result["op"], framework="pytorch", mode=result["mode"],
                amp="off", devices=1, repeats=1, timeout_s=0, seed=result["seed"],
                spec={"shape": result["shape"], "dtype": result["dtype"], "direction": result["direction"]})
    ctx = CellContext(cell=cell, platform="cpu", repeat=0, data_folder=None, synthetic=True)
    run, _ = impl.build(result["op"], result["shape"], result["dtype"], result["direction"], ctx,
                        operators.arrays(result["op"], result["shape"], result["seed"]))
    for _ in range(3):
        run()
    # Timer defaults to one thread; the harness's cells run with PyTorch's default thread count.
    timer = tb.Timer(stmt="run()", globals={"run": run}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=1.0).median


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--only", default="operator/*")
    p.add_argument("--keep", help="keep the sweeps' run folders under this folder")
    a = p.parse_args()
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="opstab-"))
    runs = [sweep(base / f"sweep{i}", a.only) for i in range(a.sweeps)]
    cells = sorted(set.intersection(*(set(r) for r in runs)))
    cvs = {}
    for c in cells:
        medians = [r[c]["median_s"] for r in runs]
        cvs[c] = pstdev(medians) / mean(medians)
    within = sum(cv <= 0.05 for cv in cvs.values())
    for c, cv in sorted(cvs.items(), key=lambda kv: -kv[1]):
        print(f"CV {100 * cv:5.1f}%  {c}")
    print(f"\n1. {within}/{len(cvs)} configurations ({100 * within / max(len(cvs), 1):.0f}%) have a CV of their "
          f"median <= 5% over {a.sweeps} sweeps (goal: >= 90%)")
    agree, rows = 0, []
    for c in cells:
        r = runs[0][c]
        if r["framework"] != "pytorch":
            continue
        ref = autorange_median(r)
        diff = r["median_s"] / ref - 1
        agree += abs(diff) <= 0.05
        rows.append((diff, c, r["median_s"], ref))
    for diff, c, h, ref in sorted(rows, key=lambda t: -abs(t[0])):
        print(f"{100 * diff:+6.1f}%  harness {1e3 * h:9.4f} ms  blocked_autorange {1e3 * ref:9.4f} ms  {c}")
    print(f"\n2. {agree}/{len(rows)} PyTorch configurations agree with blocked_autorange within 5%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
