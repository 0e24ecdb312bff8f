"""Several hosts, tested as two nodes on one machine (tools/nodes_here.py: one `harness run` per node, each on its own
core, HARNESS_NNODES=2, a fixed master port): torchrun with PyTorch eager and msrun with MindSpore GRAPH, 2 nodes x 1
process. Node 0 records one result per cell with every rank in it; node 1 records that it served it. The merged result
is checked against the single-node 2-process cell with each rank on as many cores (same global batch, same weights
after training). A rank that dies ends every node's runner in one line naming the node and rank; --resume on every
node then finishes the cell. The Slurm scripts run as written, with Slurm's variables set by hand (the two-node run
goes through tools/slurm/multinode.sbatch)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config import cellid
from harness.config.matrix import load
from harness.errors import HarnessError
from harness.launch import process as launch
from tests.helpers import REPO, harness, processes_with, write_matrix

sys.path.insert(0, str(REPO / "tools"))
import nodes_here  # noqa: E402

SETTINGS = ("pytorch/eager", "mindspore/graph")
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _nodes(out: Path, args: list[str], timeout=900) -> list[tuple[int, list[str]]]:
    """Both nodes' runners to their end: (exit code, output lines) per node."""
    procs = nodes_here.start(2, out, args, _port(), env=ENV)
    rcs = [p.wait(timeout=timeout) for p in procs]
    return [(rc, (out.parent / f"{out.name}.node{k}.log").read_text().splitlines()) for k, rc in enumerate(rcs)]


def _result(run: Path, cell: str, repeat: int = 0) -> dict:
    return json.loads((run / "cells" / cell / f"r{repeat}.json").read_text())


def _global_batch(mllog: Path) -> int:
    for line in mllog.read_text().splitlines():
        if '"key": "global_batch_size"' in line:
            return json.loads(line.split(":::MLLOG", 1)[1])["value"]
    raise AssertionError(f"no global_batch_size in {mllog}")


SRUN = """#!/bin/bash
# Stand-in for `srun --ntasks-per-node=1 [options] CMD ARGS` in a job of SLURM_NNODES nodes: CMD once per "node",
# with SLURM_NODEID set, each on its own core, its output and exit code in $TEST_LOGS/node<k>.{log,rc}.
while [ "${1#--}" != "$1" ]; do shift; done
read -r -a cores <<< "$TEST_CORES"
for k in $(seq 0 $((SLURM_NNODES - 1))); do
    (SLURM_NODEID=$k taskset -c "${cores[$k]}" "$@" > "$TEST_LOGS/node$k.log" 2>&1; echo $? > "$TEST_LOGS/node$k.rc") &
done
wait
"""
SCONTROL = '#!/bin/sh\n[ "$1 $2 $3" = "show hostnames node[7-8]" ] && printf "127.0.0.1\\n127.0.0.2\\n"\n'


def _slurm_job(tmp: Path, run_args: list[str], job: int) -> list[tuple[int, list[str]]]:
    """tools/slurm/multinode.sbatch as Slurm would run it on 2 nodes: SLURM_JOB_ID, SLURM_NNODES, SLURM_JOB_NODELIST
    and SLURM_SUBMIT_DIR set by hand, with stand-ins for the two Slurm commands it runs (`srun`, which starts
    tools/slurm/node.sh on each "node" with SLURM_NODEID, and `scontrol show hostnames`); each node on its own core
    (tools/nodes_here.py's slices). Its run folders: tmp/job/node<k>."""
    fake = tmp / "bin"
    fake.mkdir(exist_ok=True)
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    env = {**ENV, "PATH": f"{fake}:{os.environ['PATH']}", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "node[7-8]",
           "SLURM_JOB_ID": str(job), "SLURM_SUBMIT_DIR": str(REPO), "HARNESS_PYTHON": sys.executable,
           "HARNESS_SLURM_OUT": str(tmp / "job"), "TEST_LOGS": str(tmp),
           "TEST_CORES": " ".join(str(min(c)) for c in nodes_here.core_slices(2))}
    p = subprocess.run(["bash", str(REPO / "tools/slurm/multinode.sbatch"), "cpu", *run_args], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return [(int((tmp / f"node{k}.rc").read_text()), (tmp / f"node{k}.log").read_text().splitlines())
            for k in (0, 1)]


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """Both settings' 2x1dev cells, through the Slurm batch script (so it is tested as written, too)."""
    tmp = tmp_path_factory.mktemp("nodes")
    job = next(j for j in range(os.getpid() % 20000, 40000) if _free(20000 + j % 20000))
    only = ",".join(f"scaling/resnet50/{s}/amp-off/2x1dev" for s in SETTINGS)
    nodes = _slurm_job(tmp, ["--synthetic", "--only", only, "--repeats", "1"], job=job)
    return tmp / "job", nodes, 20000 + job % 20000   # the port tools/slurm/node.sh derives from the job id


@pytest.fixture(scope="module")
def one_node(tmp_path_factory, scaling_run):
    """The single-node 2-process cells the two-node ones are checked against, each rank seeing one core as each rank
    of the two 1-core nodes does (both frameworks' CPU results depend on the cores a rank sees). PyTorch's: the
    suite's scaling run (2 cores, 2 ranks: one thread each, as harness.frameworks.pytorch gives a rank its host's
    cores over the ranks there). MindSpore GRAPH's: run here, the whole run confined to one core."""
    out = tmp_path_factory.mktemp("one") / "run"
    core = min(os.sched_getaffinity(0))
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--synthetic", "--out", str(out),
                        "--only", "scaling/resnet50/mindspore/graph/amp-off/2dev", "--repeats", "1"], cwd=REPO,
                       env=ENV, capture_output=True, text=True, timeout=900,
                       preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    assert p.returncode == 0, p.stderr[-3000:]
    return {"pytorch/eager": scaling_run.out, "mindspore/graph": out}


def test_every_node_ends_cleanly_node_0_records_and_node_1_serves(two_nodes):
    """Also the Slurm batch script, run as written: node rank, master address and port from Slurm's variables."""
    _, ((rc0, lines0), (rc1, lines1)), port = two_nodes
    assert (rc0, rc1) == (0, 0), lines0[-5:] + lines1[-5:]
    assert lines0[-1].startswith("done: 2 ok") and lines1[-1].startswith("done: 2 served")
    assert any(f"multi-node run: node 1 of 2, rendezvous at 127.0.0.1:{port}" in line for line in lines1)


@pytest.mark.parametrize("setting", SETTINGS)
def test_node_0_holds_one_result_with_every_rank(two_nodes, setting):
    out, _, _ = two_nodes
    cell = f"scaling/resnet50/{setting}/amp-off/2x1dev"
    r = _result(out / "node0", cell)
    assert r["status"] == "ok" and r["world_size"] == 2 and r["devices"] == 2 and r["nodes"] == 2
    assert r["ranks_per_node"] == {"0": [0], "1": [1]}
    assert set(r["rank_throughput"]) == {"0", "1"} and all(v > 0 for v in r["rank_throughput"].values())
    assert r["global_throughput"] == pytest.approx(sum(r["rank_throughput"].values()))
    assert r["per_device_throughput"] == pytest.approx(r["global_throughput"] / 2)
    assert r["params_identical_across_ranks"] is True
    for rank in (0, 1):   # every rank's event log in node 0's folder, rank 1's sent over the collective
        assert (out / "node0" / "cells" / cell / f"r0.rank{rank}.mllog").is_file()
    served = _result(out / "node1", cell)
    assert served["status"] == "served" and served["node_rank"] == 1
    assert set(served["rank_throughput"]) == {"1"} and served["global_throughput"] is None
    assert served["rank_throughput"]["1"] == pytest.approx(r["rank_throughput"]["1"])


@pytest.mark.parametrize("setting", SETTINGS)
def test_merged_result_matches_the_single_node_two_process_cell(two_nodes, one_node, setting):
    out, _, _ = two_nodes
    multi = out / "node0" / "cells" / f"scaling/resnet50/{setting}/amp-off/2x1dev"
    single = one_node[setting] / "cells" / f"scaling/resnet50/{setting}/amp-off/2dev"
    assert _global_batch(multi / "r0.rank0.mllog") == _global_batch(single / "r0.rank0.mllog") == 32
    a, b = json.loads((multi / "r0.json").read_text()), json.loads((single / "r0.json").read_text())
    assert a["state_sha256"] == b["state_sha256"], "the same training over 2 nodes and on 1 host left other weights"
    assert b["status"] == "ok" and b["params_identical_across_ranks"] is True
    assert "2 processes" in b["settings"]["distributed"]
    assert b["global_throughput"] == pytest.approx(sum(b["rank_throughput"].values()))


def test_the_report_shows_devices_as_nodes_x_devices_per_node(two_nodes, tmp_path):
    out, _, _ = two_nodes
    p = harness("report", out / "node0", "--out", tmp_path / "report")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "report" / "report.html").read_text()
    assert "2 (2 nodes x 1)" in html
    p = harness("report", out / "node1", "--out", tmp_path / "worker")   # a worker's folder: says where to look
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "worker" / "report.html").read_text()
    assert "is node 1&#39;s run folder of a multi-node run" in html or "is node 1's run folder" in html
    assert "did not finish ok" not in html


@pytest.mark.parametrize("setting, node0_says, bound_s", [
    ("pytorch/eager", "node 0 rank 0 lost its connection to a rank on another node", 60),
    ("mindspore/graph", "rank 1, on another node, stopped answering msrun's scheduler", 120)])
def test_a_dead_rank_ends_every_nodes_runner_naming_the_node_and_rank(tmp_path, setting, node0_says, bound_s):
    """Rank 1 (node 1) is killed once it has joined the job (its init_stop): node 1 names it; node 0 says what it
    saw; both runners end within bound_s (measured on the 2-core machine: PyTorch gloo 1-3 s, msrun's scheduler
    about 35 s), exit 1, leave no worker behind and no traceback on the runner's output. PyTorch's cell then
    finishes with --resume on both."""
    matrix = (REPO / "harness" / "config" / "matrix.toml").read_text().replace(
        "profile.quick = { epochs = 2, train_samples = 32,", "profile.quick = { epochs = 500, train_samples = 32,")
    (tmp_path / "long.toml").write_text(matrix)
    cell = f"scaling/resnet50/{setting}/amp-off/2x1dev"
    out = tmp_path / "run"
    args = ["--platform", "cpu", "--synthetic", "--only", cell, "--repeats", "1"]
    port = _port()
    procs = nodes_here.start(2, out, [*args, "--matrix", str(tmp_path / "long.toml")], port, env=ENV)
    events = out / "node1" / "cells" / cell / "r0.rank1.mllog"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (events.exists() and '"init_stop"' in events.read_text()):
        time.sleep(0.2)
    spec = str(out / "node1" / "cells" / cell / "r0.spec.json").encode()
    victims = []
    for proc in Path("/proc").iterdir():
        try:
            environ = b"\0" + (proc / "environ").read_bytes()
            if spec in (proc / "cmdline").read_bytes() and (b"\0RANK_ID=1\0" in environ or b"\0RANK=1\0" in environ):
                victims.append(int(proc.name))
        except (OSError, ValueError):
            continue
    assert victims, "rank 1 not found"
    t0 = time.monotonic()
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    took = []
    for p in procs:
        p.wait(timeout=bound_s + 60)
        took.append(time.monotonic() - t0)
    lines = [(out.parent / f"{out.name}.node{k}.log").read_text().splitlines() for k in (0, 1)]
    assert [p.returncode for p in procs] == [1, 1]
    assert max(took) < bound_s, took
    assert lines[1][-1].startswith(f"stopped on node 1: {cell} r0 failed: node 1 rank 1: killed by SIGKILL")
    assert lines[0][-1].startswith(f"stopped on node 0: {cell} r0 failed: {node0_says}")
    assert not any("Traceback" in line for node in lines for line in node)
    for k in (0, 1):
        assert _result(out / f"node{k}", cell)["status"] == "failed"
    time.sleep(1)
    assert not processes_with(str(out))
    if setting == "pytorch/eager":
        (rc0, l0), (rc1, l1) = _nodes(out, [*args, "--resume"])   # the quick profile's 2 epochs, on both nodes
        assert (rc0, rc1) == (0, 0) and l0[-1].startswith("done: 1 ok") and l1[-1].startswith("done: 1 served")
        assert _result(out / "node0", cell)["status"] == "ok"


def test_a_multi_node_cell_needs_its_devices_per_node_on_each_host():
    from harness.host.plan import Host

    cell = next(c for c in load().expand("quick", nodes=2) if c.id.endswith("pytorch/eager/amp-off/2x2dev"))
    assert Host("cuda", "quick", 2, {}, load()).verdict(cell) is None        # 4 devices over 2 hosts of 2
    assert Host("cuda", "quick", 1, {}, load()).verdict(cell) == "needs 2 devices on each host, the host shows 1"


def test_multi_node_cells_are_the_profiles_data_parallel_settings_at_each_count_per_node():
    cells = load().expand("quick", nodes=2)
    assert sorted(c.id for c in cells) == sorted(f"scaling/resnet50/{s}/amp-off/2x{n}dev"
                                                 for s in SETTINGS for n in (1, 2))
    c = next(c for c in cells if c.id.endswith("2x2dev"))
    assert (c.devices, c.nodes, c.devices_per_node, c.kind) == (4, 2, 2, "scaling")
    parsed = cellid.parse(c.id)
    assert (parsed.devices, parsed.nodes, str(parsed)) == (4, 2, c.id)
    for bad in ("scaling/resnet50/pytorch/eager/amp-off/1x2dev", "scaling/resnet50/pytorch/eager/amp-off/x2dev"):
        with pytest.raises(ValueError):
            cellid.parse(bad)


@pytest.mark.parametrize("env, says", [
    ({"HARNESS_NNODES": "2", "HARNESS_NODE_RANK": "0", "HARNESS_MASTER_ADDR": "10.0.0.1"}, "needs HARNESS_MASTER_PORT"),
    ({"HARNESS_NNODES": "2", "HARNESS_NODE_RANK": "2", "HARNESS_MASTER_ADDR": "a", "HARNESS_MASTER_PORT": "1"},
     "node ranks run from 0 to 1"),
    ({"HARNESS_NNODES": "two"}, "HARNESS_NNODES='two' is not a whole number"),
    ({"HARNESS_NODE_RANK": "1"}, "without HARNESS_NNODES"),
])
def test_bad_node_settings_are_one_line_and_exit_2(tmp_path, env, says):
    with pytest.raises(HarnessError, match=says):
        launch.nodes(env)
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--out", str(tmp_path / "r"),
                        "--synthetic"], cwd=REPO, env={**ENV, **env}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
    assert not (tmp_path / "r").exists()


def test_the_slurm_array_script_runs_one_shard_per_task(tmp_path):
    """tools/slurm/array.sbatch as array tasks 3 and 4 of --array=3-4 (SLURM_ARRAY_* set by hand): shards 1/2 and
    2/2 into their own folders, which `harness report` merges."""
    m = write_matrix(tmp_path / "m.toml", epochs=2, frameworks=("pytorch", "mindspore"), modes=("eager", "graph"))
    for task in (3, 4):
        env = {**ENV, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_COUNT": "2",
               "SLURM_ARRAY_JOB_ID": "77", "HARNESS_PYTHON": sys.executable, "HARNESS_SLURM_OUT": str(tmp_path / "a")}
        p = subprocess.run(["bash", "tools/slurm/array.sbatch", "cpu", "--matrix", str(m), "--synthetic"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
    shards = [json.loads((tmp_path / "a" / f"shard-{k}" / "run.json").read_text())["shard"] for k in (1, 2)]
    assert shards == ["1/2", "2/2"]
    p = harness("report", tmp_path / "a" / "shard-1", tmp_path / "a" / "shard-2", "--out", tmp_path / "rep")
    assert p.returncode == 0, p.stderr
