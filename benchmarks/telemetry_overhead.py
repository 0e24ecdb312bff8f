"""Training throughput with the telemetry sampler running / without it, per cell (goal: >= 0.99).

For each cell (GCN and ResNet50, quick profile, AMP off, one device), one fresh process (as the runner
gives every cell) runs the harness's training scenario (scenarios/training.py) `--rounds` times with the
sampler started around it as harness/launch/child.py does, and as many times without it, alternating which
goes first, after one warm-up run that is not counted. Throughput is the scenario's own: the mean of the
epochs after the first. It prints each round's pair and the median of the per-round ratios, and, as a
noise-free bound, what one host sample costs on this machine.

    python benchmarks/telemetry_overhead.py [--models gcn,resnet50] [--rounds 3] [--gcn-epochs 101]
                                            [--resnet50-epochs 3] [--interval 0.1] [--data-dir DIR]

Datasets missing from --data-dir (CIFAR-10 on the CI machine) are synthetic, as `--synthetic cifar10`.
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
from harness import telemetry  # noqa: E402
from harness.config import matrix  # noqa: E402
from harness.frameworks import backend as load_backend  # noqa: E402
from harness.launch.inprocess import set_up  # noqa: E402
from harness.results import eventlog  # noqa: E402
from harness.scenarios import training  # noqa: E402
from harness.telemetry.cpu import CpuSource  # noqa: E402


def sample_cost_us(n: int = 2000) -> float:
    """Mean wall time of one host sample (RSS, CPU time, RAPL where readable), in microseconds."""
    src = CpuSource()
    src.open()
    src.read()
    t = time.perf_counter()
    for _ in range(n):
        src.read()
    return (time.perf_counter() - t) / n * 1e6


def measure(cell_id: str, profile: str, epochs: int, rounds: int, data_dir: str | None) -> dict:
    """In this process: alternate sampled and unsampled runs of the training scenario on one cell."""
    cell = next(c for c in matrix.load().expand(profile) if c.id == cell_id)
    cell = replace(cell, spec=replace(cell.spec, epochs=epochs))
    folder = str(datasets.prepare(cell.dataset, Path(data_dir), False)) if data_dir else None
    s = set_up(cell, folder, until="backend")  # the training scenario loads the data and builds, as in the child
    ctx, backend = s.ctx, s.backend
    env = {**os.environ, "HARNESS_TELEMETRY": "on"}

    def run(sampled: bool) -> tuple[float, int]:
        with tempfile.TemporaryDirectory() as tmp:
            events = eventlog.EventLog(Path(tmp) / "r0.mllog")
            sampler = telemetry.for_platform("cpu", env=env) if sampled else None
            if sampler is not None:
                sampler.start()
            try:
                training.run(ctx, backend, events)
            finally:
                events.close()
                rec = sampler.stop() if sampler is not None else None
            tput = training.summarise(eventlog.read(Path(tmp) / "r0.mllog"), cell)["mean_throughput_other_epochs"]
            return tput, len(rec["sources"]["psutil"]["samples"]) if rec else 0

    run(True)  # process warm-up (thread pools, allocator, kernel caches, graph compilation caches), not counted
    out = [{"with": on, "without": off, "ratio": on / off, "samples": n}
           for (on, n), (off, _) in alternate(lambda: run(True), lambda: run(False), rounds)]
    return {"cell": cell_id, "rounds": out, "median_ratio": median(r["ratio"] for r in out),
            "unit": cell.spec.throughput_unit}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gcn,resnet50")
    p.add_argument("--profile", default="quick", help="whose data slice and settings to use (default: quick)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--gcn-epochs", type=int, default=101)
    p.add_argument("--resnet50-epochs", type=int, default=3)
    p.add_argument("--gru-epochs", type=int, default=3)
    p.add_argument("--interval", type=float, help="sampling interval in seconds (default: the harness's, 0.1)")
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--epochs", type=int, help=argparse.SUPPRESS)
    p.add_argument("--child-data-dir", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(measure(a.child, a.profile, a.epochs, a.rounds, a.child_data_dir)))
        return 0
    m = matrix.load()
    models = [s.strip() for s in a.models.split(",") if s.strip()]
    cells = [c for c in m.expand(a.profile) if c.model in models and c.kind == "model" and c.amp == "off"]
    env_extra = {"HARNESS_TELEMETRY_INTERVAL_S": str(a.interval)} if a.interval else {}
    interval = telemetry.interval_s({**os.environ, **env_extra})
    cost = sample_cost_us()
    print(f"one host sample: {cost:.1f} us = {100 * cost * 1e-6 / interval:.3f}% of one core at {1 / interval:g} Hz; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    print(f"throughput with / without the sampler, {a.rounds} rounds per cell (ratio >= 0.99 is the goal)")
    for cell in cells:
        dataset = cell.dataset
        real = Path(a.data_dir, datasets.module(dataset).FOLDER).is_dir()
        epochs = getattr(a, f"{cell.model}_epochs")
        env = {**os.environ, **load_backend(cell.framework).process_env("cpu"), **env_extra, "PYTHONPATH": str(REPO)}
        args = [sys.executable, __file__, "--child", cell.id, "--profile", a.profile, "--epochs", str(epochs),
                "--rounds", str(a.rounds)] + (["--child-data-dir", a.data_dir] if real else [])
        t = time.monotonic()
        proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            print(f"{cell.id}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rounds = "  ".join(f"{x['with']:,.2f}/{x['without']:,.2f}={x['ratio']:.3f}" for x in r["rounds"])
        print(f"{cell.id}: median ratio {r['median_ratio']:.3f}   ({r['unit']}, {epochs} epochs, "
              f"{'real' if real else 'synthetic'} {dataset}, {time.monotonic() - t:.0f} s; with/without per round: "
              f"{rounds}; samples per sampled run: {r['rounds'][0]['samples']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
