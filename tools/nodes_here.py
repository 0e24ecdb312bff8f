"""Several nodes on one machine: start one `python -m harness run` per node, as a cluster's hosts would, and wait.

    python tools/nodes_here.py --nodes 2 --out runs/two-nodes -- --platform cpu --synthetic --only 'scaling/*' ...
 Each node gets HARNESS_NNODES, HARNESS_NODE_RANK, HARNESS_MASTER_ADDR=127.0.0.1 and a fixed HARNESS_MASTER_PORT, its
own run folder (OUT/node0, OUT/node1, ...) and its own share of this machine's cores (node k the k-th slice, so two
1-core "hosts" on a 2-core machine), and prints its last line. It is how the test suite runs a multi-node cell where
there is one machine, and a way to try the multi-node path before a cluster is at hand. Exit code: the worst node's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def core_slices(nodes: int, share: bool = False) -> list[set[int]]:
    cores = sorted(os.sched_getaffinity(0))
    if share or len(cores) < nodes:
        return [set(cores)] * nodes   # fewer cores than nodes: they share them all
    size = len(cores) // nodes
    return [set(cores[k * size:(k + 1) * size]) for k in range(nodes)]


def start(nodes: int, out: Path, args: list[str], port: int, env: dict | None = None,
          share_cores: bool = False) -> list[subprocess.Popen]:
    procs = []
    for k, cores in enumerate(core_slices(nodes, share_cores)):
        node_env = {**(env or os.environ), "HARNESS_NNODES": str(nodes), "HARNESS_NODE_RANK": str(k),
                    "HARNESS_MASTER_ADDR": "127.0.0.1", "HARNESS_MASTER_PORT": str(port)}
        log = open(out.parent / f"{out.name}.node{k}.log", "w")   # noqa: SIM115 - open while the node runs
        procs.append(subprocess.Popen([sys.executable, "-m", "harness", "run", "--out", str(out / f"node{k}"), *args],
                                      cwd=REPO, env=node_env, stdout=log, stderr=subprocess.STDOUT,
                                      preexec_fn=lambda c=cores: os.sched_setaffinity(0, c)))
    return procs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--out", type=Path, required=True, help="folder for the nodes' run folders OUT/node<k>")
    p.add_argument("--port", type=int, default=29531, help="HARNESS_MASTER_PORT (default 29531)")
    p.add_argument("--share-cores", action="store_true", help="every node on all of this machine's cores")
    p.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then `harness run`'s options, without --out")
    a = p.parse_args(argv)
    args = a.run_args[1:] if a.run_args[:1] == ["--"] else a.run_args
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    procs = start(a.nodes, a.out, args, a.port, share_cores=a.share_cores)
    rcs = []
    for k, proc in enumerate(procs):
        rcs.append(proc.wait())
        lines = (a.out.parent / f"{a.out.name}.node{k}.log").read_text().splitlines()
        print(f"node {k}: exit {rcs[-1]} after {time.monotonic() - t0:.0f} s: {lines[-1] if lines else ''}")
    return max(rcs)


if __name__ == "__main__":
    sys.exit(main())
