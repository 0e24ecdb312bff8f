"""What every PyTorch model file builds its workload with: the AMP implementation it trains under (mixed_precision:
torch.autocast + GradScaler, or apex O2 on Ascend), data-parallel wrapping, and the network as the cell's mode runs
it (compiled), the optimiser's implementation (optimizer_options) and the host pipeline that feeds it (device_batches).
Kept beside the models, not in the back-end (harness/frameworks/pytorch.py), which holds only what
contracts.Backend names and the device it sets up; the passes, inference and operator files use `compiled` and
`autocast` too, as the model files do."""

from __future__ import annotations

import contextlib
import queue
import threading

# Batches the host pipeline builds ahead of the step on an accelerator: enough to ride out one slow batch, few
# enough that the pinned buffers stay small (ResNet50's batch of 128 is 1.5 MB).
PREFETCH_DEPTH = 3


def data_parallel(ctx, module):
    """The module wrapped for data-parallel training (gradients averaged over ranks), or itself."""
    if ctx.world_size == 1:
        return module
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(module, device_ids=None if ctx.platform == "cpu" else [ctx.local_rank])


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

    def backward(self, loss, last: bool = True) -> None:
        """The scaled loss's backward; `last`: the step's last micro-batch (GradScaler needs no telling: it unscales
        the summed gradients once, in step)."""
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

    def backward(self, loss, last: bool = True) -> None:
        # Unscales the master gradients on exit; with gradient accumulation apex's documented way is to delay that
        # (delay_unscale=True) for every micro-batch but the step's last.
        with self.amp.scale_loss(loss, self.optimizer, delay_unscale=not last) as scaled:
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


def accumulate(amp, parts, loss_of, enabled: bool = True):
    """The forward and backward passes of a training step over its micro-batches (contracts.AccumulatingModel's
    micro_batches: [(tensors, share)], one of them without accumulation), as PyTorch documents gradient accumulation
    (the AMP examples' "Gradient accumulation"): each micro-batch's loss under autocast, times its share, and its
    backward, the gradients adding up in .grad. The caller then takes one optimiser step (amp.step: GradScaler
    unscales the summed gradients once, skips the step if any micro-batch overflowed, and updates its scale once a
    step) and one step of its schedule. Returns the batch's loss, detached."""
    total = None
    for i, (part, share) in enumerate(parts):
        with amp.autocast(enabled):
            loss = loss_of(*part)
        if len(parts) > 1:   # one micro-batch: the step as it was, not even a multiplication more
            loss = loss * share
        amp.backward(loss, last=i == len(parts) - 1)
        total = loss.detach() if total is None else total + loss.detach()
    return total


def compiled(ctx, module):
    """The module as the cell's mode runs it: itself in eager mode, torch.compile'd (TorchInductor, the
    default backend: PyTorch's static-graph counterpart to MindSpore GRAPH mode) in compile mode, with the mode the
    back-end chose (settings["compile_mode"]: "reduce-overhead", CUDA graphs, on cuda; "default" elsewhere). Only the
    network is compiled, not the optimiser step, so a learning rate set per step never lives in a captured graph."""
    import torch

    if ctx.cell.mode != "compile":
        return module
    return torch.compile(module, mode=ctx.settings.get("compile_mode", "default"))


def optimizer_options(ctx, name: str) -> dict:
    """Keyword arguments for the torch.optim optimiser `name` (SGD, Adam, AdamW) on the cell's device, recorded as
    settings["optimizer_impl"]. On cuda: fused=True, PyTorch's documented fastest implementation for all three (one
    kernel for the whole update), which also takes GradScaler's found_inf as a tensor, so an AMP step no longer reads
    it back to the host (GradScaler.step's .item() for other optimisers). On CPU the default implementation, which the
    CPU equivalence tests and the recorded CPU reference gaps were measured with; on Ascend too: torch_npu documents
    its own fused optimisers (torch_npu.optim.NpuFused*), not torch.optim's fused=True."""
    fused = ctx.platform == "cuda"
    ctx.settings["optimizer_impl"] = f"torch.optim.{name}, " + ("fused=True" if fused else "default implementation")
    return {"fused": True} if fused else {}


def defined_momentum(optimizer) -> None:
    """Zero momentum buffers for a fused SGD before its first step. Fused SGD allocates them with torch.empty_like on
    its first step and fills them in the kernel that GradScaler's found_inf skips; fp16's first loss scales overflow,
    so the first step is skipped, the buffers stay uninitialised and later updates are NaN (seen on an H200 with
    torch 2.11: ResNet50's AMP loss NaN from the fourth step, the loss scale down to 32; the default implementation
    trained). With dampening 0 (every model here) a zero buffer gives the same first update:
    buf = momentum * 0 + grad."""
    import torch

    d = optimizer.defaults
    if not d.get("fused") or not d.get("momentum") or d.get("dampening"):
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            optimizer.state[p].setdefault("momentum_buffer", torch.zeros_like(p))


def prefetch_depth(ctx) -> int:
    """Batches built ahead of the step: the hparam `prefetch` where the cell sets it, else PREFETCH_DEPTH on cuda and
    ascend and 0 on CPU, where the step and the host pipeline share the same cores (the synchronous path the CPU
    reference gaps were measured with)."""
    depth = ctx.hparams.get("prefetch")
    depth = int(depth) if depth is not None else (0 if ctx.platform == "cpu" else PREFETCH_DEPTH)
    ctx.settings["host_pipeline"] = (f"prefetch thread, {depth} batches ahead, pinned memory, non_blocking copies"
                                     if depth > 0 else "synchronous, one batch at a time")
    return depth


def device_batches(ctx, dev, batches, host, to_device, depth: int | None = None):
    """The epoch's batches on the device, as a context manager to iterate in:

        with device_batches(ctx, dev, numpy_batches, host, to_device) as it:
            for batch in it: ...

    `host(numpy batch)` makes the host tensors (torch.from_numpy, dtype casts), `to_device(tensors, non_blocking)`
    copies them to `dev`. With depth 0, one batch at a time in this thread (what every model did before). Otherwise
    PyTorch's documented way to keep an accelerator fed (DataLoader(pin_memory=True) with non_blocking copies): a
    thread runs the host pipeline `depth` batches ahead into pinned memory, and each copy is queued on the device's
    stream without waiting. The batches and their order are the generator's, as on the synchronous path."""
    depth = prefetch_depth(ctx) if depth is None else depth
    if depth <= 0:
        return contextlib.nullcontext(to_device(host(b), False) for b in batches)
    return Prefetcher(batches, host, to_device, depth, pin=dev.type != "cpu")


class Prefetcher:
    """A thread building the next batches into a bounded queue while the step runs; see device_batches. Leaving the
    `with` block (the epoch's end, or an exception mid-epoch) stops and joins the thread; an exception raised by the
    host pipeline is raised in the consumer at the batch it was building."""

    _END = object()

    def __init__(self, batches, host, to_device, depth: int, pin: bool):
        self._host, self._to_device, self._pin = host, to_device, pin
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(batches,), name="host-prefetch", daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self, batches) -> None:
        try:
            for b in batches:
                tensors = self._host(b)
                if self._pin:
                    tensors = tuple(t.pin_memory() for t in tensors)
                if not self._put(tensors):
                    return
            self._put(self._END)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            self._put(e)

    def __iter__(self):
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield self._to_device(item, True)

    def __enter__(self):
        return iter(self)

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, timeout: float = 30.0) -> None:
        self._stop.set()
        while True:  # free a producer blocked on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("the host prefetch thread did not stop")

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class ImageProbes:
    """The probes (contracts.ProbedWorkload) of an image classifier with BatchNorm, the same for ResNet50 and
    GoogLeNet: a workload that has `net`, `_step(x, y, lr, amp)`, `probe_lr` and the probe tensors on its device
    (`probe_test`, `probe_x`, `probe_y`) gets them from here."""

    def probe_forward(self):
        """Eval-mode logits (fp32) of the first test images."""
        import torch

        self.net.eval()
        with torch.no_grad():
            return self.net(self.probe_test).float().cpu().numpy()

    def probe_step(self) -> float:
        """One fp32 optimiser step (train mode, learning rate probe_lr) on the first training images,
        unaugmented; returns the loss before the update."""
        self.net.train()
        return self._step(self.probe_x, self.probe_y, self.probe_lr, amp=False).item()

    def probe_loss(self) -> float:
        """The loss on the probe step's batch after the step, computed as the step computed it (BN with batch
        statistics), with the BN running statistics left as they were: see tests/test_cifar10.py."""
        import torch
        import torch.nn.functional as F

        saved = {k: v.clone() for k, v in self.net.named_buffers()}
        self.net.train()
        with torch.no_grad():
            loss = F.cross_entropy(self.net(self.probe_x), self.probe_y).item()
            for k, v in self.net.named_buffers():
                v.copy_(saved[k])
        return loss

    def state_arrays(self) -> list:
        # Trainable parameters: data parallelism keeps them equal on every rank (BatchNorm's running statistics
        # are each rank's own in MindSpore and rank 0's in DDP, so they are not compared).
        return [p.detach().cpu().numpy() for p in self.net.parameters()]
