"""Does an operator's time depend on where its buffers land? (docs/methodology/operators.md, item 11)
 For each quick-profile operator cell of the chosen frameworks (default: MindSpore's), --processes fresh processes per
allocator, interleaved (a, b, c, a, b, c, ...), each set up as the runner sets up the cell on a CPU host: confined to
the operator's cores (harness.scenarios.operator.ops.cpu_cores), the back-end's process environment for an operator
cell with HARNESS_ALLOCATOR set to that allocator, its `setup`, and the operator scenario that times the cell
(harness/scenarios/operator.py). It prints each process's median time per allocator with their CV
(how far the processes disagree), then per allocator the range of those CVs and how its median process compares with
the first allocator's (faster or slower by more than 2%, or within 2%).

    python benchmarks/operator_layout.py [--processes 3] [--allocators system,tcmalloc,jemalloc]
                                         [--frameworks mindspore] [--only 'operator/*']

Timings: run it with nothing else on the host; it prints the load average before and after.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import allocator_requested, cv, loadavg  # noqa: E402


def probe(cell_json: str) -> None:
    """One cell's operator timed in this process as the child times it (its cores, the back-end's setup, the operator
    scenario itself); prints its median and IQR."""
    from harness.config.cell import Cell
    from harness.launch.child import leave_now
    from harness.launch.inprocess import set_up
    from harness.results import eventlog
    from harness.scenarios import operator
    from harness.scenarios.operator import ops as operators

    cell = Cell.from_dict(json.loads(cell_json))
    cores = operators.cpu_cores("cpu", cell.kind)
    if cores:  # before any thread starts, as harness/launch/child.py
        os.sched_setaffinity(0, cores)
    setup = set_up(cell, until="backend")
    with tempfile.TemporaryDirectory() as tmp:
        events = eventlog.EventLog(Path(tmp) / "probe.mllog")
        t = operator.run(setup.ctx, setup.backend, events)
        events.close()
    print(json.dumps({"median_s": t["median_s"], "iqr_s": t["iqr_s"]}), flush=True)
    leave_now(0)  # as the child: the framework's teardown measures nothing


def run_probe(cell, allocator: str) -> float:
    from harness.frameworks import backend as load_backend

    with allocator_requested(allocator):
        process_env = load_backend(cell.framework).process_env("cpu", cell.kind)
    env = {**os.environ, **process_env,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, __file__, "--probe", json.dumps(cell.to_dict())], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{cell.id} under {allocator}: the probe failed: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median_s"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--allocators", default="system,tcmalloc,jemalloc")
    p.add_argument("--frameworks", default="mindspore")
    p.add_argument("--only", default="operator/*")
    p.add_argument("--probe", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.probe:
        probe(a.probe)
        return 0
    from harness.config import matrix
    from harness.errors import HarnessError
    from harness.host import allocator

    names = a.allocators.split(",")
    try:
        for name in names:
            allocator.choose("pytorch", name)  # an allocator this host cannot preload: one line, before any probe
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    frameworks = set(a.frameworks.split(","))
    cells = [c for c in matrix.load().expand("quick") if c.kind == "operator" and c.framework in frameworks
             and c.spec.dtype == "fp32" and fnmatch.fnmatch(c.id, a.only)]
    print(f"before: load average {loadavg()}", flush=True)
    medians: dict[str, dict[str, list[float]]] = {}
    for cell in cells:
        got = medians[cell.id] = {name: [] for name in names}
        for _ in range(a.processes):
            for name in names:
                got[name].append(run_probe(cell, name))
        print(f"{cell.id.removeprefix('operator/')[:72]:72s} " + " | ".join(
            f"{name} " + " ".join(f"{x * 1e6:7.0f}" for x in got[name]) + f" (CV {100 * cv(got[name]):4.1f}%)"
            for name in names), flush=True)
    print(f"after: load average {loadavg()}\n")
    first = names[0]
    for name in names:
        cvs = [cv(m[name]) for m in medians.values()]
        line = f"{name}: CV of the per-process medians {100 * min(cvs):.1f}-{100 * max(cvs):.1f}% over {len(cvs)} cells"
        if name != first:
            change = [median(m[name]) / median(m[first]) - 1 for m in medians.values()]
            line += (f"; median process against {first}'s: {sum(c < -0.02 for c in change)} faster by more than 2%, "
                     f"{sum(abs(c) <= 0.02 for c in change)} within 2%, {sum(c > 0.02 for c in change)} slower "
                     f"(from {100 * min(change):+.1f}% to {100 * max(change):+.1f}%)")
        print(line)
    print("(µs per iteration, each process's median block; processes of one cell interleaved across allocators)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
