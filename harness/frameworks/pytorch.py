"""PyTorch back-end: eager mode on CPU, CUDA (NCCL) and Ascend (torch_npu, HCCL)."""

from __future__ import annotations

import datetime
import os
import re
import sys
from typing import Any

from harness.errors import Unsupported
from harness.host import allocator

NAME = "pytorch"
MODES = ("eager", "compile")
# The profiled pass (harness.profiling) in eager mode only: torch.compile fuses ops into generated kernels whose names
# say nothing of the ops they hold.
PROFILED_MODES = ("eager",)
# The profiler's and the optimisers' record_function ranges, which torch.profiler also lays on the device's lane (the
# profiler marks them is_user_annotation; the names are the check where an older build does not)
ANNOTATION = re.compile(r"ProfilerStep#\d+|Optimizer\.(step|zero_grad)#.+|## .+ ##")


def device_work(event) -> bool:
    """Whether a device-lane profiler event is work (a kernel, copy or memset), not a host range mirrored there:
    ProfilerStep#N spans a whole step and in the busy time's union would make every step look busy (it did: ResNet50's
    profiled step on an H100 read 99.7% busy)."""
    return not (getattr(event, "is_user_annotation", False) or ANNOTATION.fullmatch(event.name))


def process_env(platform: str, kind: str = "model") -> dict[str, str]:
    # PyTorch's CPU defaults (OpenMP over all cores, oneDNN autodetected ISA) are already its best. Its host-side
    # allocations go through malloc: tcmalloc, else glibc's tunables (harness/host/allocator.py says why and what was
    # measured).
    return allocator.process_env(NAME, platform, kind)


DIST_BACKEND = {"cpu": "gloo", "cuda": "nccl", "ascend": "hccl"}
COLLECTIVE_TIMEOUT_S = 600


def launch_argv(n: int, spec_path: str, port: int, log_dir: str, multi_node: dict[str, str]) -> list[str]:
    """torchrun, one process per device. Multi-node: torchrun's own --nnodes / --node_rank /
    --master_addr, taken from HARNESS_NNODES, HARNESS_NODE_RANK and HARNESS_MASTER_ADDR."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}",
            f"--nnodes={multi_node.get('nnodes', 1)}", f"--node_rank={multi_node.get('node_rank', 0)}",
            f"--master_addr={multi_node.get('master_addr', '127.0.0.1')}", f"--master_port={port}",
            "--module", "harness.launch.child", spec_path]


def rank_from_env() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) as torchrun sets them; (0, 0, 1) without a launcher."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)),
            int(os.environ.get("WORLD_SIZE", 1)))


def setup(ctx) -> dict[str, Any]:
    import torch

    if ctx.cell.mode not in MODES:
        raise Unsupported(f"PyTorch mode '{ctx.cell.mode}' is not implemented by this back-end")
    torch.manual_seed(ctx.seed)
    settings: dict[str, Any] = {"threads": torch.get_num_threads()}
    if ctx.world_size > 1:
        # Each rank gets its share of its host's cores, as torchrun's OMP_NUM_THREADS=1 default is too few (the
        # ranks on this host: LOCAL_WORLD_SIZE, which torchrun sets; world size / nodes).
        local = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size))
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // local))
        settings["threads"] = torch.get_num_threads()
    if ctx.platform == "cuda":
        torch.cuda.set_device(ctx.local_rank)
        # cudnn.benchmark picks the fastest convolution algorithm per shape (what a user tuning for speed sets) by
        # timing the candidates on each shape's first step: on a GPU most of a first epoch. It pays where the epochs
        # after the first run enough steps to win it back; a smoke-test cell of a few steps (the quick profile's
        # ResNet50: one step an epoch after the first) would spend its time autotuning for nothing.
        bench = autotune_pays(ctx.cell.spec, ctx.hparams)
        torch.backends.cudnn.benchmark = bench
        settings["cudnn.benchmark"] = bench
    elif ctx.platform == "ascend":
        import torch_npu  # noqa: F401  (registers the 'npu' device; needs CANN at run time)

        torch.npu.set_device(ctx.local_rank)
    settings["device"] = str(device(ctx))
    if ctx.cell.mode == "compile":
        settings["compile_mode"] = compile_mode(ctx)
    if ctx.world_size > 1:
        import torch.distributed as dist

        # A collective that waits longer than this for a rank ends with an error: a rank on another node that died
        # without closing its connections (NCCL, HCCL) ends the others within it. NCCL's own default, for every
        # back-end (gloo's is 30 minutes).
        dist.init_process_group(DIST_BACKEND[ctx.platform], rank=ctx.rank, world_size=ctx.world_size,
                                timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
        settings["distributed"] = f"torchrun, {DIST_BACKEND[ctx.platform]}, {ctx.world_size} processes"
    return settings


AUTOTUNE_STEPS = 50   # steps after the first epoch from which cuDNN's autotuning is worth its first-epoch cost


def autotune_pays(spec: Any, hparams: Any) -> bool:
    """Whether a cell trains at least AUTOTUNE_STEPS steps after its first epoch (a spec without epochs or sizes, a
    passes or operator cell's, counts as long: autotuning stays on)."""
    epochs, samples, batch = getattr(spec, "epochs", None), getattr(spec, "train_samples", None), hparams.get("batch")
    if not epochs or not samples or not batch:
        return True
    return (int(epochs) - 1) * (int(samples) // int(batch)) >= AUTOTUNE_STEPS


# torch.compile's modes the harness offers (the hparam `compile_mode` picks one).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")


def compile_mode(ctx) -> str:
    """torch.compile's mode for a compile cell (harness.models._pytorch.compiled applies it): the hparam
    `compile_mode` where set, else "reduce-overhead" on cuda (CUDA graphs: a whole forward or backward replayed as one
    launch, PyTorch's documented answer to a step bound by the host's kernel launches; only the network is compiled,
    so the per-step learning rate and the optimiser stay outside the graphs) and "default" elsewhere (no CUDA graphs
    on CPU or Ascend)."""
    mode = ctx.hparams.get("compile_mode") or ("reduce-overhead" if ctx.platform == "cuda" else "default")
    if mode not in COMPILE_MODES:
        raise Unsupported(f"compile_mode '{mode}' is not one of {', '.join(COMPILE_MODES)}")
    return mode


def all_gather_object(ctx, obj: Any) -> list[Any]:
    import torch.distributed as dist

    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def profile_ops(ctx, run, folder: str, window: dict[str, Any] | None = None) -> dict[str, tuple[float, int]]:
    """run() under torch.profiler: op name -> (self time in seconds, calls). On CPU the ops' self CPU time; on a device
    (CUDA through CUPTI, Ascend through torch_npu's profiler) the self device time of their kernels. The op table
    goes to folder/ops.txt (its top rows, bounded).

    `window` (on a device, harness.profiling.profiled_epoch): record only `active` steps after `warmup` unrecorded
    ones, a step being one optimizer step (torch.optim's global step hook drives the profiler's schedule), so that
    the profiler and its parsing cost a few seconds, not an epoch's worth; with `count_flops`, the first step runs
    under torch.utils.flop_counter.FlopCounterMode, unrecorded. Filled in: steps, window_s (the recorded steps' wall
    time, the device synchronised at both ends), kernels ((name, start s, end s) of the device's kernels and copies),
    flops_per_step. No shapes, stacks or memory are recorded: they cost host time per op.

    A `window` without `active` (a CPU's pass) asks for the count only: the first step runs under the counter and the
    profiler starts after it, so every later step is recorded as before; filled in: flops_per_step and counted_s (the
    counted step's wall time, the profiler's start included, for the pass to leave out of its profiled steps)."""
    import torch

    if ctx.platform == "ascend":
        import torch_npu

        prof_mod = torch_npu.profiler
        acts = [prof_mod.ProfilerActivity.CPU, prof_mod.ProfilerActivity.NPU]
    else:
        prof_mod = torch.profiler
        acts = [prof_mod.ProfilerActivity.CPU] + ([prof_mod.ProfilerActivity.CUDA] if ctx.platform == "cuda" else [])
    if window is None:
        with prof_mod.profile(activities=acts) as prof:
            run()
            synchronize(ctx)
    elif "active" not in window:   # a count only (a CPU's pass): every step after the counted one recorded
        prof = _counted_first(run, prof_mod, acts, window)
    else:
        _windowed(ctx, run, prof_mod, acts, window)
        prof = window.pop("_prof")
    from torch.autograd import DeviceType

    from harness import profiling

    ops: dict[str, tuple[float, int]] = {}
    kernels: list[tuple[str, float, float]] = []
    for e in prof.events():
        if e.device_type != DeviceType.CPU:
            # a kernel's own event: its time is already its op's self device time; its interval is the timeline's
            if device_work(e):
                kernels.append((e.name, e.time_range.start / 1e6, e.time_range.end / 1e6))
            continue
        if profiling.host_call(e.name):
            continue   # the runtime's API and the profiler's own records: host work, the overhead's
        # An op called by another that has a category of its own (aten::dropout calls aten::bernoulli_, div_, mul)
        # counts there: its time goes to the outermost such caller.
        outer, parent = None, e.cpu_parent
        while parent is not None:
            if profiling.scope(NAME, parent.name):
                outer = parent.name
            parent = parent.cpu_parent
        key = outer or e.name
        # On a device the ops' kernels' time (an op without one, the host's work, is left to the overhead: the step's
        # wall time the device was not busy); on a CPU the ops' own time.
        us = e.self_device_time_total if ctx.platform != "cpu" else e.self_cpu_time_total
        t, n = ops.get(key, (0.0, 0))
        ops[key] = (t + us / 1e6, n + (key == e.name))
    if window is not None and "active" in window:
        window["kernels"] = kernels
        window["source"] = "torch_npu.profiler" if ctx.platform == "ascend" else "torch.profiler"
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "ops.txt"), "w") as f:
        f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=60))
    return ops


def _counted_first(run, prof_mod, acts, window: dict[str, Any]):
    """run() with its first optimizer step under FlopCounterMode and the profiler recording every step after it: the
    count costs the counter's own time on one step the pass runs anyway, and that step's time (the counter slows it)
    goes to no op. Returns the profiler object."""
    import time

    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    prof = prof_mod.profile(activities=acts)
    t0 = time.perf_counter()

    def hook(optimizer, args, kwargs) -> None:
        nonlocal counter
        if counter is None:
            return
        counter.__exit__(None, None, None)
        window["flops_per_step"] = counter.get_total_flops() or None
        counter = None
        prof.start()
        window["counted_s"] = time.perf_counter() - t0

    handle = register_optimizer_step_post_hook(hook)
    counter.__enter__()
    try:
        run()
    finally:
        handle.remove()
        if counter is not None:   # no optimizer step ran: nothing was counted, nothing recorded
            counter.__exit__(None, None, None)
            prof.start()
        prof.stop()
    return prof


def _windowed(ctx, run, prof_mod, acts, window: dict[str, Any]) -> None:
    """run() with the profiler recording `window["active"]` optimizer steps after `warmup` (and the FLOP-counting
    step) unrecorded; the profiler object goes to window["_prof"]."""
    import time

    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.flop_counter import FlopCounterMode

    counting = bool(window.get("count_flops"))
    wait, warmup, active = int(counting), window["warmup"], window["active"]
    counter = FlopCounterMode(display=False) if counting else None
    state = {"step": 0, "t0": None, "t1": None}

    def stop_counting() -> None:
        nonlocal counter
        if counter is not None:
            counter.__exit__(None, None, None)
            window["flops_per_step"] = counter.get_total_flops() or None
            counter = None

    with prof_mod.profile(activities=acts, schedule=prof_mod.schedule(wait=wait, warmup=warmup, active=active,
                                                                        repeat=1)) as prof:
        def hook(optimizer, args, kwargs) -> None:
            i = state["step"]
            if i == 0:
                stop_counting()
            if i == wait + warmup - 1:   # the window opens after this step: the device drained first
                synchronize(ctx)
                state["t0"] = time.perf_counter()
            elif i == wait + warmup + active - 1:
                synchronize(ctx)
                state["t1"] = time.perf_counter()
            state["step"] = i + 1
            prof.step()

        handle = register_optimizer_step_post_hook(hook)
        if counter is not None:
            counter.__enter__()
        try:
            run()
            synchronize(ctx)
        finally:
            handle.remove()
            stop_counting()
    if state["t0"] is not None and state["t1"] is not None:
        window["steps"], window["window_s"] = active, state["t1"] - state["t0"]
    window["_prof"] = prof


def device(ctx):
    import torch

    kind = {"cpu": "cpu", "cuda": "cuda", "ascend": "npu"}[ctx.platform]
    return torch.device(kind) if kind == "cpu" else torch.device(kind, ctx.local_rank)


def set_threads(ctx, n: int) -> dict[str, Any]:
    """Intra-op threads (torch.set_num_threads), as read back."""
    import torch

    torch.set_num_threads(n)
    return {"threads": torch.get_num_threads(), "threads_api": "torch.set_num_threads"}


def synchronize(ctx) -> None:
    import torch

    if ctx.platform == "cuda":
        torch.cuda.synchronize()
    elif ctx.platform == "ascend":
        torch.npu.synchronize()
    # CPU ops run synchronously in eager mode.


def peak_memory_mb(ctx) -> float | None:
    """PyTorch's own peak allocation on the cell's device, in MB (torch.cuda / torch.npu
    max_memory_allocated); None on CPU, where PyTorch keeps no such count."""
    import torch

    if ctx.platform == "cuda":
        return torch.cuda.max_memory_allocated(device(ctx)) / 2**20
    if ctx.platform == "ascend":
        return torch.npu.max_memory_allocated(device(ctx)) / 2**20
    return None


def reserved_memory_mb(ctx) -> float | None:
    """The peak PyTorch's caching allocator reserved on the cell's device, in MB (max_memory_reserved: the allocated
    peak plus the cached blocks it kept); None on CPU."""
    import torch

    if ctx.platform == "cuda":
        return torch.cuda.max_memory_reserved(device(ctx)) / 2**20
    if ctx.platform == "ascend":
        return torch.npu.max_memory_reserved(device(ctx)) / 2**20
    return None


def versions() -> dict[str, Any]:
    import torch

    out = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    if os.environ.get("ASCEND_HOME_PATH") or os.path.exists("/usr/local/Ascend"):
        try:
            import torch_npu

            out["torch_npu"] = torch_npu.__version__
        except Exception as e:  # noqa: BLE001 - record why, never fail the cell for a version probe
            out["torch_npu"] = f"unavailable: {e}"
    return out


def parameter_count(net) -> int:
    """Trainable parameters, as `python -m harness models` reports them for every model."""
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def layer_count(net) -> int:
    """Modules that own parameters directly (conv, dense, BatchNorm, embedding, GRU, graph convolution):
    the one definition of a layer for every model, matched by the MindSpore back-end's."""
    return sum(1 for m in net.modules() if list(m.parameters(recurse=False)))
