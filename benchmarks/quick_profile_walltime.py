"""Run the quick profile as a user would and print its wall time, per cell and in total.

    python benchmarks/quick_profile_walltime.py [--data-dir DIR] [--out DIR] [--only GLOB]

Datasets present under --data-dir (default ../shared/data) are used; the run is --synthetic when
none is there (CIFAR-10 is not on the CI machine, so ResNet50 cells then use synthetic images only
if the whole run is synthetic: pass --synthetic to force that)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--out")
    p.add_argument("--only")
    a = p.parse_args()
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="quick-")) / "run"
    cmd = [sys.executable, "-m", "harness", "run", "--platform", "cpu", "--profile", "quick", "--out", str(out)]
    cmd += ["--synthetic"] if a.synthetic else ["--data-dir", a.data_dir]
    cmd += ["--only", a.only] if a.only else []
    t = time.monotonic()
    rc = subprocess.run(cmd, cwd=REPO).returncode
    wall = time.monotonic() - t
    results = json.loads(subprocess.run([sys.executable, "-m", "harness", "results", str(out), "--json"], cwd=REPO,
                                        capture_output=True, text=True).stdout or "[]")
    for r in results:
        print(f"{r.get('elapsed_s') or 0:7.1f} s  {r['status']:8} {r['cell']}")
    counts = {s: sum(r["status"] == s for r in results) for s in sorted({r["status"] for r in results})}
    print(f"quick profile: {len(results)} cells {counts} in {wall:.0f} s wall ({wall / 60:.1f} min), exit {rc}; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
