"""Harness throughput / bare-loop throughput for a model cell, per framework (goal: >= 0.99).

For each cell, one fresh process (as the runner gives every cell) alternates, `--rounds` times:
  harness: the harness's own training scenario (scenarios/training.py: event log, per-epoch clock,
           validation after every epoch), reporting its mean throughput of the epochs after the first;
  bare:    a fresh workload, one warm-up step, then `--epochs - 1` plain back-to-back steps timed as
           one block, synchronised at the end.
It prints each round and the median ratio. Usage:

    python benchmarks/harness_overhead.py [--model gcn] [--profile quick] [--epochs 101] [--rounds 3]
                                          [--data-dir DIR | --synthetic]
    python benchmarks/harness_overhead.py --model resnet50 --epochs 4 --rounds 3   # synthetic CIFAR here
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.alternate import alternate  # noqa: E402
from harness import data as datasets  # noqa: E402
from harness.config import matrix  # noqa: E402
from harness.frameworks import backend as load_backend  # noqa: E402
from harness.launch.inprocess import set_up  # noqa: E402
from harness.results import eventlog  # noqa: E402
from harness.scenarios import training  # noqa: E402


def measure(cell_id: str, profile: str, epochs: int, rounds: int, data_dir: str | None,
            train_samples: int | None) -> dict:
    """In this process: alternate harness and bare loop on one cell."""
    cell = next(c for c in matrix.load().expand(profile) if c.id == cell_id)
    cell = replace(cell, spec=replace(cell.spec, epochs=epochs, train_samples=train_samples or cell.spec.train_samples))
    folder = str(datasets.prepare(cell.dataset, Path(data_dir), False)) if data_dir else None
    s = set_up(cell, folder, until="data")  # the bare loop builds its own workloads on s.data
    ctx, backend = s.ctx, s.backend

    def harness_loop() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            events = eventlog.EventLog(Path(tmp) / "r0.mllog")
            training.run(ctx, backend, events)
            events.close()
            return training.summarise(eventlog.read(Path(tmp) / "r0.mllog"), cell)["mean_throughput_other_epochs"]

    def bare_loop() -> float:
        workload = s.build()
        workload.train_epoch()  # warm-up: the harness's first epoch is excluded too
        t = time.perf_counter()
        for _ in range(epochs - 1):
            workload.train_epoch()
        backend.synchronize(ctx)
        return (epochs - 1) * workload.samples_per_epoch / (time.perf_counter() - t)

    bare_loop()  # process warm-up (thread pools, allocator, kernel caches), not counted
    out = [{"harness": h, "bare": b, "ratio": h / b} for h, b in alternate(harness_loop, bare_loop, rounds)]
    return {"cell": cell_id, "rounds": out, "median_ratio": median(r["ratio"] for r in out),
            "unit": cell.spec.throughput_unit}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gcn")
    p.add_argument("--profile", default="quick", help="whose data slice and settings to use (default: quick)")
    p.add_argument("--epochs", type=int, default=101)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--train-samples", type=int, help="override the profile's training slice (models that have one)")
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    dataset = matrix.load().data["models"][a.model]["dataset"]
    folder = datasets.module(dataset).FOLDER
    data_dir = None if a.synthetic or not Path(a.data_dir, folder).is_dir() else a.data_dir
    if a.child:
        print(json.dumps(measure(a.child, a.profile, a.epochs, a.rounds, data_dir, a.train_samples)))
        return 0
    cells = [c for c in matrix.load().expand(a.profile) if c.model == a.model and c.kind == "model" and c.amp == "off"]
    print(f"harness / bare-loop throughput, {a.model}, {a.epochs} epochs x {a.rounds} rounds, "
          f"{'real data from ' + data_dir if data_dir else 'synthetic data'}")
    for cell in cells:
        env = {**os.environ, **load_backend(cell.framework).process_env("cpu"), "PYTHONPATH": str(REPO)}
        args = [sys.executable, __file__, "--child", cell.id, "--profile", a.profile, "--epochs", str(a.epochs),
                "--rounds", str(a.rounds)] + (["--train-samples", str(a.train_samples)] if a.train_samples else [])
        args += ["--data-dir", data_dir] if data_dir else ["--synthetic"]
        proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            print(f"{cell.id}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rounds = "  ".join(f"{x['harness']:,.1f}/{x['bare']:,.1f}={x['ratio']:.3f}" for x in r["rounds"])
        print(f"{cell.id}: median ratio {r['median_ratio']:.3f}   ({r['unit']}, harness/bare per round: {rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
