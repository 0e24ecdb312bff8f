"""Does the host's memory change an operator's speed in phases? (docs/methodology/operators.md, item 14)
 One operator cell's process, set up as the runner sets up an operator cell on a CPU host (the back-end's process
environment for an operator cell, address randomisation off, confined to the operator's core, the back-end's
`setup` and the operator's `build`), times its blocks back to back for --seconds. Every second it prints the 10th
percentile of that second's block times beside the 10th percentile of the memory probe taken between them
(harness.scenarios.operator.turns.Probe: one read of a 4 MiB buffer), so that phases in which the host's memory is
contended show in both columns at once. --other-core starts the same configuration's PyTorch eager cell, computing back
to back on another core, from a quarter to a half of the run: what the other vCPU's work does to this one.

    python benchmarks/memory_phases.py [--cell GLOB] [--seconds 40] [--other-core]

Timings: run it with nothing else on the host; it prints the load average before and after.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402

DEFAULT = "operator/batchnorm2d/mindspore/graph/fp32/fwd+bwd/batch16-channels16-size32"


def operator_process(cell_json: str, cores: list[int]):
    """In this process (started by `start`), the cell's operator set up as the runner sets one up: every thread
    confined to `cores`, the back-end's `setup` and thread count, the operator's `build`. Returns (run, sync, cell)."""
    from harness.config.cell import Cell
    from harness.launch.child import confine
    from harness.launch.inprocess import set_up
    from harness.scenarios.operator import ops as operators

    cell = Cell.from_dict(json.loads(cell_json))
    confine(cores)
    setup = set_up(cell, until="backend")
    ctx, shape = setup.ctx, dict(cell.spec.shape)
    ctx.settings.update(setup.backend.set_threads(ctx, len(cores)))
    impl = importlib.import_module(f"harness.scenarios.operator.{cell.framework}")
    run, sync = impl.build(cell.op, shape, cell.spec.dtype, cell.spec.direction, ctx,
                           operators.arrays(cell.op, shape, cell.seed))
    return run, sync, cell


def probe(cell_json: str, seconds: float, cores: list[int]) -> None:
    """The cell's operator timed in this process for `seconds`, a line a second (see the module's docstring)."""
    from harness.launch.child import leave_now
    from harness.scenarios.operator import ops as operators
    from harness.scenarios.operator import turns

    run, sync, cell = operator_process(cell_json, cores)
    timing = operators.sweep_timing(cell.framework, cell.mode)
    n = operators.block_size(run, sync, timing["min_block_s"], timing["min_block_iters"])
    read = turns.Probe()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        blocks, probes, second = [], [], time.perf_counter()
        while time.perf_counter() - second < 1.0:
            probes.append(read())
            blocks.append(operators.one_block(run, sync, n))
        print(json.dumps({"t": round(time.perf_counter() - start, 1), "block_s": float(np.percentile(blocks, 10)),
                          "probe_s": float(np.percentile(probes, 10))}), flush=True)
    leave_now(0)


def quick_operator_cell(pattern: str):
    """The one quick-profile operator cell `pattern` matches, and the cores an operator cell's process is confined to
    here; None, with the one-line error printed, where it matches none or several."""
    from harness.config import matrix
    from harness.scenarios.operator import ops as operators

    cells = [c for c in matrix.load().expand("quick") if c.kind == "operator" and fnmatch.fnmatch(c.id, pattern)]
    if len(cells) != 1:
        print(f"error: --cell {pattern} matches {len(cells)} of the quick profile's operator cells; give one cell id "
              "(python -m harness list --profile quick)", file=sys.stderr)
        return None
    return cells[0], operators.cpu_cores("cpu", "operator") or sorted(os.sched_getaffinity(0))[:1]


def start(cell, seconds: float, cores: list[int], script: str = __file__,
          extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """`script --probe CELL --seconds S --cores C [extra]` in a process with the cell's process environment, as the
    runner starts an operator cell's child; its stdout a pipe."""
    from harness.frameworks import backend as load_backend
    from harness.scenarios.operator import ops as operators

    env = {**os.environ, **load_backend(cell.framework).process_env("cpu", cell.kind),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, script, "--probe", json.dumps(cell.to_dict()), "--seconds", str(seconds),
            "--cores", ",".join(map(str, cores)), *extra]
    operators.fixed_layout()   # address randomisation off for what this process starts, as in an operator cell's
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", default=DEFAULT)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--other-core", action="store_true")
    p.add_argument("--probe", help=argparse.SUPPRESS)
    p.add_argument("--cores", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.probe:
        probe(a.probe, a.seconds, [int(c) for c in a.cores.split(",")])
        return 0
    from harness.config import cellid, matrix

    found = quick_operator_cell(a.cell)
    if found is None:
        return 2
    cell, cores = found
    others = sorted(os.sched_getaffinity(0) - set(cores))
    if a.other_core and not others:
        print("error: --other-core needs a second core this process may run on", file=sys.stderr)
        return 2
    print(f"before: load average {loadavg()}", flush=True)
    print(f"{cell.id} on core {cores}" + (f"; PyTorch eager on core {others[:1]} from {a.seconds / 4:.0f} to "
                                          f"{a.seconds / 2:.0f} s" if a.other_core else ""), flush=True)
    timed = start(cell, a.seconds, cores)
    partner = None
    if a.other_core:
        config = cellid.configuration(cell.id)
        twin = next(c for c in matrix.load().expand("quick") if c.kind == "operator" and c.framework == "pytorch"
                    and cellid.configuration(c.id) == config)
        time.sleep(a.seconds / 4 + 3)   # the timed process's set-up, about 3 s on the 2-core machine
        partner = start(twin, a.seconds / 4, others[:1])
    for line in timed.stdout:
        row = json.loads(line)
        print(f"{row['t']:6.1f} s  block {row['block_s'] * 1e6:9.0f} us  memory probe {row['probe_s'] * 1e6:6.0f} us",
              flush=True)
    timed.wait()
    if partner is not None:
        partner.stdout.read()
        partner.wait()
    print(f"after: load average {loadavg()}")
    return 0 if timed.returncode == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
