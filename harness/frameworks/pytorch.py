"""PyTorch back-end: eager mode on CPU, CUDA (NCCL) and Ascend (torch_npu, HCCL)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from harness import allocator
from harness.errors import Unsupported

NAME = "pytorch"
MODES = ("eager", "compile")


def process_env(platform: str) -> dict[str, str]:
    # PyTorch's CPU defaults (OpenMP over all cores, oneDNN autodetected ISA) are already its best. Its host-side
    # allocations go through malloc: tcmalloc, else glibc's tunables (harness/allocator.py says why and what was
    # measured).
    return allocator.process_env(NAME)


DIST_BACKEND = {"cpu": "gloo", "cuda": "nccl", "ascend": "hccl"}


def launch_argv(n: int, spec_path: str, port: int, log_dir: str, multi_node: dict[str, str]) -> list[str]:
    """torchrun, one process per device. Multi-node: torchrun's own --nnodes / --node_rank /
    --master_addr, taken from HARNESS_NNODES, HARNESS_NODE_RANK and HARNESS_MASTER_ADDR."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}",
            f"--nnodes={multi_node.get('nnodes', 1)}", f"--node_rank={multi_node.get('node_rank', 0)}",
            f"--master_addr={multi_node.get('master_addr', '127.0.0.1')}", f"--master_port={port}",
            "--module", "harness.child", spec_path]


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
        # Each rank gets its share of the host's cores, as torchrun's OMP_NUM_THREADS=1 default is too few.
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // ctx.world_size))
        settings["threads"] = torch.get_num_threads()
    if ctx.platform == "cuda":
        torch.cuda.set_device(ctx.local_rank)
        # cudnn.benchmark picks the fastest convolution algorithm per shape: what a user tuning for speed sets.
        torch.backends.cudnn.benchmark = True
        settings["cudnn.benchmark"] = True
    elif ctx.platform == "ascend":
        import torch_npu  # noqa: F401  (registers the 'npu' device; needs CANN at run time)

        torch.npu.set_device(ctx.local_rank)
    settings["device"] = str(device(ctx))
    if ctx.world_size > 1:
        import torch.distributed as dist

        dist.init_process_group(DIST_BACKEND[ctx.platform], rank=ctx.rank, world_size=ctx.world_size)
        settings["distributed"] = f"torchrun, {DIST_BACKEND[ctx.platform]}, {ctx.world_size} processes"
    return settings


def data_parallel(ctx, module):
    """The module wrapped for data-parallel training (gradients averaged over ranks), or itself."""
    if ctx.world_size == 1:
        return module
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(module, device_ids=None if ctx.platform == "cpu" else [ctx.local_rank])


def device(ctx):
    import torch

    kind = {"cpu": "cpu", "cuda": "cuda", "ascend": "npu"}[ctx.platform]
    return torch.device(kind) if kind == "cpu" else torch.device(kind, ctx.local_rank)


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


def amp_dtype(ctx):
    """Mixed-precision compute type: fp16 on GPU/NPU (as the paper), bf16 on CPU (CPU autocast's type)."""
    import torch

    return torch.bfloat16 if ctx.platform == "cpu" else torch.float16


def autocast(ctx):
    """Context manager for the forward pass and loss: autocast when the cell's AMP is on, else a no-op.
    PyTorch's one AMP setting is recorded as O2 (the paper's PyTorch AMP level)."""
    import torch

    kind = {"cpu": "cpu", "cuda": "cuda", "ascend": "npu"}[ctx.platform]
    return torch.autocast(kind, dtype=amp_dtype(ctx), enabled=ctx.cell.amp != "off")


def grad_scaler(ctx):
    """Loss scaling for fp16 (GPU/NPU); disabled for fp32 and for bf16, which needs none."""
    import torch

    kind = {"cpu": "cpu", "cuda": "cuda", "ascend": "npu"}[ctx.platform]
    return torch.amp.GradScaler(kind, enabled=ctx.cell.amp != "off" and ctx.platform != "cpu")


class NativeAmp:
    """torch.autocast for the forward pass and loss, GradScaler for the backward pass and the update: PyTorch's own
    AMP, on every platform (fp16 on GPU/NPU, bf16 on CPU, where no loss scaling is needed)."""

    name = "torch.autocast + GradScaler"

    def __init__(self, ctx, optimizer):
        self.ctx, self.optimizer, self.scaler = ctx, optimizer, grad_scaler(ctx)

    def autocast(self, enabled: bool = True):
        return autocast(self.ctx) if enabled else contextlib.nullcontext()

    def backward(self, loss) -> None:
        self.scaler.scale(loss).backward()

    def clip_(self, params, max_norm: float) -> None:
        """Unscale, then clip the gradients the optimiser will apply (torch.nn.utils.clip_grad_norm_)."""
        import torch

        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(params, max_norm)

    def step(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()


class ApexO2:
    """The paper's PyTorch AMP on Ascend: apex (Ascend's fork, built against torch_npu) at opt_level O2: the model in
    fp16 with BatchNorm in fp32, fp32 master weights in the optimiser, dynamic loss scaling. The model is already
    fp16, so the forward pass needs no autocast; gradients are clipped on the master weights."""

    name = "apex O2 (fp16 model, fp32 BatchNorm and master weights, dynamic loss scale)"

    def __init__(self, amp, optimizer):
        self.amp, self.optimizer = amp, optimizer

    def autocast(self, enabled: bool = True):
        return contextlib.nullcontext()

    def backward(self, loss) -> None:
        with self.amp.scale_loss(loss, self.optimizer) as scaled:  # unscales the master gradients on exit
            scaled.backward()

    def clip_(self, params, max_norm: float) -> None:
        import torch

        torch.nn.utils.clip_grad_norm_(self.amp.master_params(self.optimizer), max_norm)

    def step(self) -> None:
        self.optimizer.step()


def mixed_precision(ctx, model, optimizer):
    """(model, optimizer, amp): what every PyTorch model trains with. With the cell's AMP on Ascend and Ascend's apex
    importable: apex O2, the path the paper took (apex.amp.initialize must see the bare model, so call this before
    DDP and torch.compile). Everywhere else, and with AMP off: NativeAmp (a pass-through when AMP is off). The choice
    is recorded in the cell's settings as `amp_impl`."""
    amp_impl = NativeAmp(ctx, optimizer)
    if ctx.cell.amp != "off" and ctx.platform == "ascend":
        try:
            from apex import amp
        except ImportError:
            ctx.settings["amp_impl_note"] = "apex (Ascend fork) not installed: torch.autocast on npu instead"
        else:
            # combine_grad: Ascend apex's fused gradient buffers, as Ascend's model zoo sets for O2 training.
            model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale="dynamic",
                                              combine_grad=True)
            amp_impl = ApexO2(amp, optimizer)
    if ctx.cell.amp != "off":
        ctx.settings["amp_impl"] = amp_impl.name
        ctx.settings["amp_dtype"] = str(amp_dtype(ctx)).removeprefix("torch.")
    return model, optimizer, amp_impl


def compiled(ctx, module):
    """The module as the cell's mode runs it: itself in eager mode, torch.compile'd (TorchInductor, the
    default backend: PyTorch's static-graph counterpart to MindSpore GRAPH mode) in compile mode."""
    import torch

    return torch.compile(module) if ctx.cell.mode == "compile" else module


def parameter_count(net) -> int:
    """Trainable parameters, as `python -m harness models` reports them for every model."""
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def layer_count(net) -> int:
    """Modules that own parameters directly (conv, dense, BatchNorm, embedding, GRU, graph convolution):
    the one definition of a layer for every model, matched by the MindSpore back-end's."""
    return sum(1 for m in net.modules() if list(m.parameters(recurse=False)))
