"""Where operator timing noise comes from: probes of one operator configuration, each in a fresh process
set up as the runner sets up a cell (the back-end's process environment and allocator, its `setup`), printing

  launch    the per-call cost of `run()` queued back to back (one sync at the end) against `run()` + `sync()` per
            call, and `sync()` alone on finished work: how much of a short block is launch and sync, not the operator
  blocks    the block times of harness.scenarios.operator.ops.blocked_time as the sweep takes them (min_block_s 0.05):
  spread
            (IQR / median), max / min, and the first three blocks against the rest (the first blocks after
            compilation); and the same with blocks ten times longer (min_block_s 0.5)
  process   each probe repeated in `--processes` fresh processes: the spread of their medians (between processes)
            against the spread within one (pyperf's observation: per-process state differs)
  variants  MindSpore without its thread-to-core binding (the back-end binds); PyTorch under glibc's allocator (the
            back-end preloads tcmalloc)

    python benchmarks/operator_noise.py [--processes 3] [--configs conv2d-bwd,linear-fwd,bn-fwd]

Timings: run it with nothing else on the host; it prints the load average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import allocator_requested, loadavg  # noqa: E402

# Quick-profile configurations: the smallest Linear (launch-bound), the larger Conv2d forward+backward, the larger
# BatchNorm2d forward (memory-bound), and the smaller of each of the others.
CONFIGS = {
    "linear-fwd": ("linear", {"batch": 64, "in_features": 64, "out_features": 512}, "fwd"),
    "linear-bwd": ("linear", {"batch": 64, "in_features": 512, "out_features": 512}, "fwd+bwd"),
    "conv2d-fwd": ("conv2d", {"batch": 16, "in_channels": 16, "out_channels": 64, "size": 32}, "fwd"),
    "conv2d-bwd": ("conv2d", {"batch": 16, "in_channels": 64, "out_channels": 64, "size": 32}, "fwd+bwd"),
    "bn-fwd": ("batchnorm2d", {"batch": 16, "channels": 256, "size": 32}, "fwd"),
    "bn-bwd": ("batchnorm2d", {"batch": 16, "channels": 16, "size": 32}, "fwd+bwd"),
}
SETTINGS = [("pytorch", "eager", ""), ("mindspore", "graph", ""), ("mindspore", "pynative", ""),
            ("mindspore", "graph", "unbound"), ("pytorch", "eager", "glibc")]


def probe(framework: str, mode: str, variant: str, config: str) -> dict:
    """In this process: set up as a cell, build the operator, measure."""
    from harness.config.cell import Cell
    from harness.config.context import CellContext
    from harness.config.spec import OperatorSpec
    from harness.frameworks import backend as load_backend
    from harness.scenarios.operator import ops as operators

    op, shape, direction = CONFIGS[config]
    cell = Cell(id=f"operator/{op}/{framework}/{mode}/fp32/{direction}/probe", kind="operator", op=op,
                framework=framework, mode=mode, amp="off", devices=1, repeats=1, timeout_s=0, seed=0,
                spec=OperatorSpec(title=op, shape=shape, dtype="fp32", direction=direction))
    ctx = CellContext(cell=cell, platform="cpu", repeat=0, data_folder=None, synthetic=True)
    backend = load_backend(framework)
    if variant == "unbound":
        import mindspore as ms
        ms.runtime.set_cpu_affinity = lambda *a, **k: None   # the back-end's binding left out
    ctx.settings = backend.setup(ctx)
    impl = __import__(f"harness.scenarios.operator.{framework}", fromlist=["build"])
    run, sync = impl.build(op, shape, "fp32", direction, ctx, operators.arrays(op, shape, 0))
    t0 = time.perf_counter()
    run()
    sync()
    first_call = time.perf_counter() - t0   # includes compilation in GRAPH mode
    for _ in range(3):
        run()
    sync()
    k = 50
    each = []
    for _ in range(k):
        t = time.perf_counter()
        run()
        sync()
        each.append(time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(k):
        run()
    queued_end = time.perf_counter()
    sync()
    queued = (time.perf_counter() - t) / k
    launch_only = (queued_end - t) / k      # returns before the work is done where the framework is asynchronous
    syncs = []
    for _ in range(k):
        t = time.perf_counter()
        sync()
        syncs.append(time.perf_counter() - t)
    short = operators.blocked_time(run, sync)                       # as the sweep times it
    long = operators.blocked_time(run, sync, min_block_s=0.5, min_run_s=5.0)
    return {"first_call_s": first_call, "each_s": median(each), "queued_s": queued, "launch_only_s": launch_only,
            "sync_s": median(syncs), "short": short, "long": long, "threads": len(os.listdir("/proc/self/task")),
            "settings": ctx.settings}


def run_probe(framework: str, mode: str, variant: str, config: str) -> dict:
    from harness.frameworks import backend as load_backend

    # the process environment as the back-end gives it; for the glibc variant, with glibc's allocator
    with allocator_requested("system") if variant == "glibc" else contextlib.nullcontext():
        process_env = load_backend(framework).process_env("cpu")
    env = {**os.environ, **process_env,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, __file__, "--probe", json.dumps([framework, mode, variant, config])],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"probe {framework} {mode} {variant} {config} failed: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(times: list[float]) -> tuple[float, float, float]:
    """(IQR / median, max / min, median of the first three blocks / median of the rest)"""
    q1, q3 = np.percentile(times, [25, 75])
    mid = median(times)
    rest = times[3:] or times
    return (q3 - q1) / mid, max(times) / min(times), median(times[:3]) / median(rest)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--configs", default="linear-fwd,conv2d-bwd,bn-fwd")
    p.add_argument("--settings", default=None, help="comma-separated framework/mode[/variant] (default: all)")
    p.add_argument("--json", help="write every probe's measurements to this file")
    p.add_argument("--probe", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.probe:
        print(json.dumps(probe(*json.loads(a.probe))))
        return 0
    settings = SETTINGS if not a.settings else [tuple((s + "//").split("/")[:3]) for s in a.settings.split(",")]
    print(f"before: load average {loadavg()}", flush=True)
    every = {}
    for config in a.configs.split(","):
        print(f"\n== {config}: {CONFIGS[config][0]} {CONFIGS[config][2]} {CONFIGS[config][1]}")
        print(f"{'setting':<28}{'first':>9}{'run+sync':>10}{'queued':>9}{'launch':>9}{'sync':>9}"
              f"{'blk0.05':>9}{'IQR/med':>8}{'max/min':>8}{'first3':>7}{'blk0.5':>9}{'IQR/med':>8}"
              f"{'procCV':>7}{'thr':>4}")
        for fw, mode, variant in settings:
            if variant == "unbound" and fw != "mindspore" or variant == "glibc" and fw != "pytorch":
                continue
            probes = [run_probe(fw, mode, variant, config) for _ in range(a.processes)]
            every[f"{config} {fw}/{mode}{'/' + variant if variant else ''}"] = probes
            first = probes[0]
            s_iqr, s_mm, s_first = spread(first["short"]["times_s"])
            l_iqr = spread(first["long"]["times_s"])[0]
            medians = [x["short"]["median_s"] for x in probes]
            proc_cv = float(np.std(medians) / np.mean(medians))
            us = 1e6
            print(f"{fw + '/' + mode + ('/' + variant if variant else ''):<28}"
                  f"{first['first_call_s'] * 1e3:8.1f}m{first['each_s'] * us:9.0f}u{first['queued_s'] * us:8.0f}u"
                  f"{first['launch_only_s'] * us:8.0f}u{first['sync_s'] * us:8.0f}u"
                  f"{first['short']['median_s'] * us:8.0f}u{s_iqr:8.2f}{s_mm:8.2f}{s_first:7.2f}"
                  f"{first['long']['median_s'] * us:8.0f}u{l_iqr:8.2f}{proc_cv:7.3f}{first['threads']:4d}", flush=True)
    print(f"\n(first: the first call, compilation included; run+sync: one call then sync, median of 50; queued: 50 "
          f"calls then one sync, per call; launch: the same without the sync; sync: sync on finished work; blk: the "
          f"median block time per iteration at min_block_s 0.05 (the sweep's) and 0.5; first3: the first three "
          f"blocks' median over the rest's; procCV: CV of the 0.05-block median over {a.processes} fresh "
          f"processes; thr: the probe process's threads)")
    print(f"after: load average {loadavg()}")
    if a.json:
        Path(a.json).write_text(json.dumps(every, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
