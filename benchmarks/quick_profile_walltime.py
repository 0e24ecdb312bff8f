"""Run the quick profile as a user would and print its wall time, per cell and in total.

    python benchmarks/quick_profile_walltime.py [--data-dir DIR] [--out DIR] [--only GLOB]

Datasets come from --data-dir (default ../shared/data); `--synthetic cifar10` replaces the ones
named (CIFAR-10 is not on the CI machine), `--synthetic` alone replaces all."""

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
    p.add_argument("--synthetic", nargs="?", const="all", metavar="DATASETS",
                   help="as `harness run --synthetic`: every dataset, or the comma-separated ones named")
    p.add_argument("--out")
    p.add_argument("--only")
    a = p.parse_args()
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="quick-")) / "run"
    cmd = [sys.executable, "-m", "harness", "run", "--platform", "cpu", "--profile", "quick", "--out", str(out)]
    cmd += ["--data-dir", a.data_dir] + (["--synthetic", a.synthetic] if a.synthetic else [])
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
