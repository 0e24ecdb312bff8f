"""MindSpore back-end: GRAPH and PYNATIVE modes on CPU, GPU (CUDA) and Ascend."""

from __future__ import annotations

import os
import platform as _platform
import sys
from typing import Any

from harness.errors import Unsupported
from harness.host import allocator
from harness.paths import HARNESS

NAME = "mindspore"
MODES = ("graph", "pynative")
PROFILED_MODES = MODES   # harness.profiling: both modes name their ops
DEVICE_TARGET = {"cpu": "CPU", "cuda": "GPU", "ascend": "Ascend"}


# MindSpore's host pipeline (runtime::AsyncRQueue) hands every launch to queue threads that busy-wait for work, and
# the caller busy-waits for them (`while (!tasks_queue_->IsEmpty()) {}`). On a CPU host with few cores they take
# the cores its kernel threads compute on: measured on the 2-core machine (docs/methodology/operators.md),
# the same PYNATIVE Conv2d forward ran 4.1 ms an iteration in one process and 7.5 ms in the next, by whether the
# queue threads spun or slept. With MS_DEV_HOST_BLOCKING_RUN=1 (read by libmindspore_runtime_pipeline.so: the task
# runs in the calling thread, no queue) it ran 3.8-5.3 ms in each of 8 processes, and PYNATIVE's other
# quick-profile operators 1.0-2.6x faster than with the queue. Set for the operator cells, whose blocks time one
# operator; the models keep the default pipeline (their reference-gap figures were measured with it).
BLOCKING_RUN = {"MS_DEV_HOST_BLOCKING_RUN": "1"}


def process_env(platform: str, kind: str = "model") -> dict[str, str]:
    env = {"GLOG_v": "2"}  # warnings and errors only: MindSpore's INFO logging costs time and disk
    if platform == "cpu" and kind == "operator":
        env |= BLOCKING_RUN
    # its runtime pools device and host memory itself; its operator cells on CPU get tcmalloc
    # (harness/host/allocator.py)
    env |= allocator.process_env(NAME, platform, kind)
    if platform == "cpu" and _platform.machine() in ("x86_64", "AMD64") and _has_avx512():
        # On AVX-512 CPUs MindSpore 2.10's oneDNN picks a reference kernel for 3x3 convolutions that is
        # ~100x slower; capping the ISA at AVX2 gives the fast JIT kernels (seen on the CI machine).
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    if platform == "cuda" and os.environ.get("HARNESS_MINDSPORE_CUDA_HOME"):
        # MindSpore 2.10 picks its GPU plug-in from `$CUDA_HOME/bin/nvcc --version` (CUDA_HOME unset: the GPU
        # back-end is never tried; release 11.6-11.8: libmindspore_gpu.so.11.6). The CUDA image keeps its CUDA 11
        # tree (a real nvcc 11.8 and the cu11 libraries) out of PyTorch's sight, at the path this variable names,
        # and only MindSpore's cells get it as CUDA_HOME, with its libraries on the loader's path. Natively, the
        # host's own CUDA_HOME is left as it is.
        home = os.environ["HARNESS_MINDSPORE_CUDA_HOME"]
        env["CUDA_HOME"] = home
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [f"{home}/lib64", os.environ.get("LD_LIBRARY_PATH")]))
    return env


def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512f" in f.read()
    except OSError:
        return False


def launch_argv(n: int, spec_path: str, port: int, log_dir: str, multi_node: dict[str, str]) -> list[str]:
    """msrun, one process per device (its scheduler connects them: mccl on CPU, NCCL on GPU, HCCL on
    Ascend). Multi-node: msrun's own --worker_num / --node_rank / --master_addr, from HARNESS_NNODES,
    HARNESS_NODE_RANK and HARNESS_MASTER_ADDR."""
    nodes = int(multi_node.get("nnodes", 1))
    child = HARNESS / "launch" / "child.py"
    # msrun's own code, from this interpreter: no dependence on PATH (its workers run `python`, which the runner
    # points at this interpreter too); through harness.launch.msrun, which keeps the scheduler on node 0.
    return [sys.executable, "-m", "harness.launch.msrun", f"--worker_num={n * nodes}",
            f"--local_worker_num={n}",
            f"--node_rank={multi_node.get('node_rank', 0)}",
            f"--master_addr={multi_node.get('master_addr', '127.0.0.1')}", f"--master_port={port}",
            f"--log_dir={log_dir}", "--join=True", str(child), spec_path]


def rank_from_env() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) as msrun sets them; (0, 0, 1) without a launcher."""
    world = int(os.environ.get("MS_WORKER_NUM", 1))
    if world == 1:
        return 0, 0, 1
    # msrun exports a worker's local rank as DEVICE_ID (RANK_ID is its rank over every node).
    return int(os.environ.get("RANK_ID", 0)), int(os.environ.get("DEVICE_ID", 0)), world


def setup(ctx) -> dict[str, Any]:
    import mindspore as ms

    if ctx.cell.mode not in MODES:
        raise Unsupported(f"MindSpore mode '{ctx.cell.mode}' is not implemented by this back-end")
    ms.set_context(mode=ms.GRAPH_MODE if ctx.cell.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_device(DEVICE_TARGET[ctx.platform], ctx.local_rank)
    ms.set_seed(ctx.seed)
    settings = {"device_target": DEVICE_TARGET[ctx.platform], "device_id": ctx.local_rank,
                "mode": "GRAPH_MODE" if ctx.cell.mode == "graph" else "PYNATIVE_MODE"}
    if ctx.world_size == 1:
        # MindSpore's own thread-to-core binding, which its performance guide recommends. Without it, on the 2-core
        # CI machine, its runtime threads share a core for seconds at a time and the same Conv2d step takes 12 ms
        # or 50 ms by turns; bound, 12-13 ms every time. (Several ranks on one host would need disjoint core lists:
        # left to msrun's defaults.) On CPU, the cores this process may run on: left to itself, MindSpore reads the
        # container's cpuset and binds its main thread to every core there, undoing a narrower affinity such as an
        # operator cell's one core (harness.scenarios.operator.ops.CPU_CORES; seen on the 2-core machine: confined to
        # {0}, the main thread ran on {0, 1} after the first GRAPH call). Elsewhere its own strategy, which places
        # threads near the device.
        cores = _core_ranges(os.sched_getaffinity(0)) if ctx.platform == "cpu" else None
        try:
            ms.runtime.set_cpu_affinity(True, cores)
            settings["cpu_affinity"] = cores or True
        except (RuntimeError, ValueError) as e:  # e.g. a container whose cpuset MindSpore cannot read: run unbound
            settings["cpu_affinity"] = f"not bound: {e}"
    if ctx.world_size > 1:
        from mindspore.communication import get_group_size, get_rank, init

        init()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                                     device_num=ctx.world_size)
        if (get_rank(), get_group_size()) != (ctx.rank, ctx.world_size):
            raise RuntimeError(f"msrun gave rank {get_rank()}/{get_group_size()}, the environment {ctx.rank}/"
                               f"{ctx.world_size}")
        settings["distributed"] = f"msrun, data parallel, {ctx.world_size} processes"
    return settings


def all_gather_object(ctx, obj: Any) -> list[Any]:
    # mint.distributed's object gather works on the group msrun's init() made (mccl on CPU, seen on the 2-core
    # machine in GRAPH and PYNATIVE mode; NCCL, HCCL).
    from mindspore.mint.distributed import all_gather_object as gather

    out: list[Any] = [None] * ctx.world_size
    gather(out, obj)
    return out


def profile_ops(ctx, run, folder: str, window: dict[str, Any] | None = None) -> dict[str, tuple[float, int]]:
    """run() under mindspore.profiler (its CPU activity; NPU or GPU too on a device): op type -> (total time in
    seconds, occurrences), from the op-type table it writes (FRAMEWORK/cpu_op_type_info_*.csv on CPU; on Ascend its
    op_statistic.csv). Seen on the 2-core machine in GRAPH and PYNATIVE mode with MindSpore 2.10.

    `window` (on a device): the whole epochs are recorded (GRAPH mode's sunk steps give no per-step hook), and the
    device's kernels go to window["kernels"] from the Chrome trace the profiler writes (trace_view.json, its device
    lanes), as its documentation describes it: not verified on a device here, so marked unverified."""
    import csv
    import glob

    import mindspore as ms
    from mindspore.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + {"ascend": [ProfilerActivity.NPU], "cuda": [ProfilerActivity.GPU]}.get(
        ctx.platform, [])
    with ms.profiler.profile(activities=acts, on_trace_ready=ms.profiler.tensorboard_trace_handler(folder)):
        run()
        synchronize(ctx)
    ops: dict[str, tuple[float, int]] = {}
    if ctx.platform == "ascend":
        for path in glob.glob(os.path.join(folder, "*", "ASCEND_PROFILER_OUTPUT", "op_statistic.csv")):
            with open(path, newline="") as f:
                for row in csv.DictReader(f):   # OP Type, Count, Total Time(us)
                    t, n = ops.get(row["OP Type"], (0.0, 0))
                    ops[row["OP Type"]] = (t + float(row["Total Time(us)"]) / 1e6, n + int(row["Count"]))
    if window is not None:
        _device_trace(folder, window)
    if ctx.platform == "ascend":
        return ops
    from harness import profiling

    for path in glob.glob(os.path.join(folder, "*", "FRAMEWORK", "cpu_op_detail_info_*.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):   # op_type, full_op_name, op_occurrences, op_total_time(ms), ...
                # GRAPH mode names each op with its cell's scope (".../drop0-Dropout/Dropout-op0"): an op inside a
                # cell that has a category of its own counts there, keyed "<cell>/<op type>".
                parts = row["full_op_name"].split("/")[:-1]
                cell = next((c for c in parts if profiling.scope(NAME, c + "/")), None)
                # An op the innermost cell computes itself (the loss a LossCell's construct computes from ops, not
                # from a loss cell: "network-LossCell/ReduceMax-op0"), where a scope names "<cell>/<op type>".
                inner = next((c for c in reversed(parts) if "-" in c), None)
                if cell is None and inner and profiling.scope(NAME, f"{inner}/{row['op_type']}"):
                    cell = inner
                key = f"{cell}/{row['op_type']}" if cell else row["op_type"]
                t, n = ops.get(key, (0.0, 0))
                ops[key] = (t + float(row["op_total_time(ms)"]) / 1e3, n + int(row["op_occurrences"]))
    return ops


def _device_trace(folder: str, window: dict[str, Any]) -> None:
    import glob

    from harness.profiling import device as dev

    kernels = []
    for path in glob.glob(os.path.join(folder, "*", "ASCEND_PROFILER_OUTPUT", "trace_view.json")):
        try:
            kernels += dev.trace_intervals(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue   # an unreadable trace leaves the device's figures out; the ops stand
    window.update(kernels=kernels, source="mindspore.profiler trace_view.json", verified=False)


def set_threads(ctx, n: int) -> dict[str, Any]:
    """Its CPU kernels' thread pool (mindspore.device_context.cpu.op_tuning.threads_num, which may be set once per
    process). Its runtime keeps an actor thread and a kernel thread beside the caller whatever n is (seen on the
    2-core machine); on a process confined to one core with n = 1 the kernels ran in the calling thread (the other
    two used no CPU time)."""
    import mindspore as ms

    ms.device_context.cpu.op_tuning.threads_num(n)
    return {"threads": n, "threads_api": "mindspore.device_context.cpu.op_tuning.threads_num"}


def _core_ranges(cores) -> list[str]:
    """{0, 1, 2, 5} -> ["0-2", "5-5"], set_cpu_affinity's format."""
    out: list[list[int]] = []
    for c in sorted(cores):
        if out and c == out[-1][1] + 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [f"{a}-{b}" for a, b in out]


def synchronize(ctx) -> None:
    if ctx.platform == "cpu":
        return  # runtime.synchronize() is a no-op on CPU (and logs an error); workloads read results back
    import mindspore as ms

    ms.runtime.synchronize()


def peak_memory_mb(ctx) -> float | None:
    """MindSpore's runtime memory statistics: the peak its device memory pool allocated, in MB, on GPU and
    Ascend (mindspore.runtime.max_memory_allocated; mindspore.hal before 2.5). None on CPU, where the
    statistics stay 0 because CPU kernels do not allocate from that pool."""
    if ctx.platform == "cpu":
        return None
    import mindspore as ms

    return _memory_stat(ms, "max_memory_allocated")


def reserved_memory_mb(ctx) -> float | None:
    """The peak MindSpore's device memory pool reserved from the device, in MB (max_memory_reserved); None on CPU."""
    if ctx.platform == "cpu":
        return None
    import mindspore as ms

    return _memory_stat(ms, "max_memory_reserved")


def _memory_stat(ms, name: str) -> float:
    """mindspore.runtime's statistic `name` in MB (2.5 on; MindSpore 2.10 still has it under mindspore.hal too)."""
    runtime = getattr(ms, "runtime", None)
    stat = getattr(runtime, name, None) or getattr(ms.hal, name)
    return stat() / 2**20


def versions() -> dict[str, Any]:
    import mindspore as ms

    return {"mindspore": ms.__version__}


def parameter_count(net) -> int:
    """Trainable parameters, as `python -m harness models` reports them for every model."""
    import numpy as np

    return sum(int(np.prod(p.shape)) for p in net.trainable_params())


def layer_count(net) -> int:
    """Cells that own parameters directly: the same definition as the PyTorch back-end's `layer_count`."""
    return sum(1 for _, c in net.cells_and_names() if list(c.get_parameters(expand=False)))
