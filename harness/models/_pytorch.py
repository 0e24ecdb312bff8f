"""What every PyTorch model file builds its workload with: the AMP implementation it trains under (mixed_precision:
torch.autocast + GradScaler, or apex O2 on Ascend), data-parallel wrapping, and the network as the cell's mode runs
it (compiled). Kept beside the models, not in the back-end (harness/frameworks/pytorch.py), which holds only what
contracts.Backend names and the device it sets up; the passes, inference and operator files use `compiled` and
`autocast` too, as the model files do."""

from __future__ import annotations

import contextlib


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
