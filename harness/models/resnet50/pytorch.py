"""ResNet50 (CIFAR variant) in PyTorch (eager)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models._pytorch import (
    ImageProbes,
    compiled,
    data_parallel,
    defined_momentum,
    device_batches,
    mixed_precision,
    optimizer_options,
    prefetch_depth,
)
from harness.models.resnet50 import (
    PROBE_LR,
    STAGES,
    STEM,
    accuracy,
    blocks,
    decays,
    epoch_batches,
    eval_batches,
    has_projection,
    init_weights,
    limits,
    lr_schedule,
    probe_batches,
)


def conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, cout: int, bn):
        super().__init__()
        self.conv1, self.bn1 = conv(cin, width, 1), bn(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), bn(width)  # v1.5: the stride is on the 3x3
        self.conv3, self.bn3 = conv(width, cout, 1), bn(cout)
        self.downsample = (nn.Sequential(conv(cin, cout, 1, stride), bn(cout))
                           if has_projection(cin, stride, cout) else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.downsample(x))


class ResNet50(nn.Module):
    def __init__(self, num_classes: int, bn_momentum: float, bn_eps: float):
        super().__init__()

        def bn(c):
            return nn.BatchNorm2d(c, eps=bn_eps, momentum=bn_momentum)

        self.conv1, self.bn1 = conv(3, STEM, 3), bn(STEM)
        by_stage: dict[str, list[Bottleneck]] = {}
        for name, cin, width, stride, cout in blocks():
            by_stage.setdefault(name.split(".")[0], []).append(Bottleneck(cin, width, stride, cout, bn))
        for stage, mods in by_stage.items():
            setattr(self, stage, nn.Sequential(*mods))
        self.fc = nn.Linear(STAGES[-1][0] * 4, num_classes, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def load_weights(net: nn.Module, weights: dict[str, np.ndarray]) -> None:
    state = {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    if set(state) != set(weights):
        raise RuntimeError(f"weight names differ: {sorted(set(state) ^ set(weights))[:5]}")
    with torch.no_grad():
        for name, t in state.items():
            t.copy_(torch.from_numpy(weights[name]))


class Workload(ImageProbes):
    probe_lr = PROBE_LR

    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.data, self.seed = ctx, data, ctx.seed
        self.dev = device_of(ctx)
        self.batch = int(hp["batch"])
        self.n_train, self.n_eval = limits(ctx.cell.spec, data, self.batch, ctx.world_size)
        self.samples_per_epoch = self.n_train // ctx.world_size  # this rank's share
        self.epoch = 0
        # PyTorch's performance tuning guide: channels_last for convolutional networks on CPU (oneDNN) and CUDA
        # (cuDNN, tensor cores): the same arithmetic in another memory layout. ResNet50 trained 12% faster with it on
        # the 2-core machine, measured side by side. Not on Ascend, where torch_npu chooses its own formats.
        self.layout = torch.channels_last if ctx.platform in ("cpu", "cuda") else torch.contiguous_format
        ctx.settings["memory_format"] = "channels_last" if self.layout is torch.channels_last else "contiguous"
        self.net = ResNet50(data["num_classes"], hp["bn_momentum_pt"], hp["bn_eps"]).to(self.dev,
                                                                                          memory_format=self.layout)
        load_weights(self.net, init_weights(ctx.seed, data["num_classes"]))
        named = dict(self.net.named_parameters())
        decay = [p for n, p in named.items() if decays(n)]
        no_decay = [p for n, p in named.items() if not decays(n)]
        self.opt = torch.optim.SGD([{"params": decay, "weight_decay": hp["weight_decay"]},
                                    {"params": no_decay, "weight_decay": 0.0}],
                                   lr=hp["lr"], momentum=hp["momentum"], dampening=0.0, nesterov=False,
                                   **optimizer_options(ctx, "SGD"))
        defined_momentum(self.opt)
        self.prefetch = prefetch_depth(ctx)
        steps = self.n_train // (self.batch * ctx.world_size)
        self.lrs = lr_schedule(hp["lr"], hp["warmup_epochs"], ctx.cell.spec.epochs, steps)
        self.step_no = 0
        # AMP (autocast + GradScaler, or apex O2 on Ascend) sees the bare model, before DDP and torch.compile.
        self.net, self.opt, self.amp = mixed_precision(ctx, self.net, self.opt)
        # DDP over the ranks (the module itself with one), torch.compile'd in compile mode.
        self.train_net = compiled(ctx, data_parallel(ctx, self.net))
        self.eval_net = compiled(ctx, self.net)  # evaluation needs no gradient all-reduce
        probe_test, probe_x, probe_y = probe_batches(data)
        self.probe_test = self._images(probe_test)
        self.probe_x = self._images(probe_x)
        self.probe_y = torch.from_numpy(probe_y).to(self.dev)

    def _step(self, x: torch.Tensor, y: torch.Tensor, lr: float, amp: bool = True) -> torch.Tensor:
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        if amp:
            with self.amp.autocast():
                loss = F.cross_entropy(self.train_net(x).float(), y)
            self.amp.backward(loss)
            self.amp.step()
        else:
            loss = F.cross_entropy(self.train_net(x), y)
            loss.backward()
            self.opt.step()
        return loss.detach()

    def _images(self, x) -> torch.Tensor:
        return torch.from_numpy(x).to(self.dev, memory_format=self.layout)

    def _to_device(self, tensors, non_blocking: bool) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = tensors
        return (x.to(self.dev, memory_format=self.layout, non_blocking=non_blocking),
                y.to(self.dev, non_blocking=non_blocking))

    def train_batches(self):
        """This epoch's training batches on the device (harness.models._pytorch.device_batches)."""
        return device_batches(self.ctx, self.dev, epoch_batches(self.data, self.epoch, self.seed, self.batch,
                                                                self.n_train, self.ctx.rank, self.ctx.world_size),
                              lambda b: tuple(torch.from_numpy(a) for a in b), self._to_device, self.prefetch)

    def train_epoch(self) -> float:
        self.net.train()
        losses = []
        with self.train_batches() as batches:
            for x, y in batches:
                lr = float(self.lrs[min(self.step_no, len(self.lrs) - 1)])
                losses.append(self._step(x, y, lr))
                self.step_no += 1
        self.epoch += 1
        return torch.stack(losses).mean().item()  # .item() waits for the device

    def evaluate(self, split: str) -> float:
        """Top-1 accuracy on the first eval_samples test images. CIFAR-10 has no validation split, so
        'val' and 'test' both use the test set (as is usual for CIFAR-10)."""
        self.net.eval()
        preds = []
        with torch.no_grad(), self.amp.autocast():
            for x, valid in eval_batches(self.data, self.n_eval, self.batch):
                preds.append(self.eval_net(self._images(x)).argmax(1)[:valid].cpu().numpy())
        return accuracy(np.concatenate(preds), self.data["test_y"][:self.n_eval])


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Module):
    """contracts.PassesModelModule: mean cross-entropy of the logits, the loss it trains with."""
    return lambda x, y: F.cross_entropy(net(x), y)
