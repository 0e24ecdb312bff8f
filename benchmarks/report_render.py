"""Print how long rendering a run's report takes, as a user runs it (`python -m harness report DIR`, a fresh
process each time, imports and figures included), and the in-process time of each part.

    python benchmarks/report_render.py DIR [DIR ...] [--repeats 3]

Give the folder of a quick-profile run (e.g. one made by benchmarks/quick_profile_walltime.py). Goal: <= 5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="report-bench-"))
    walls = []
    for i in range(a.repeats):
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "harness", "report", *a.runs, "--out", str(out / str(i))], cwd=REPO,
                       check=True, capture_output=True)
        walls.append(time.monotonic() - t)
    print(f"`harness report` wall time over {a.repeats} fresh processes: median {statistics.median(walls):.2f} s "
          f"(min {min(walls):.2f}, max {max(walls):.2f}); goal <= 5 s")

    # Where the time goes, in this process (imports already paid).
    sys.path.insert(0, str(REPO))
    t = time.monotonic()
    from harness.report import build as report
    parts = {"import harness.report.build (jinja2, matplotlib)": time.monotonic() - t}
    t = time.monotonic()
    data = report.collect([Path(r) for r in a.runs])
    parts["collect (read results, claims)"] = time.monotonic() - t
    t = time.monotonic()
    report.make_figures(data, out / "parts" / "figures")
    parts["figures (matplotlib PDF + SVG)"] = time.monotonic() - t
    for name, s in parts.items():
        print(f"  {s:6.2f} s  {name}")
    print(f"  ({len(data['rows'])} cell rows, {len(data['hosts'])} host(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
