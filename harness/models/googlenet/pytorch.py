"""GoogLeNet for CIFAR-10 in PyTorch (eager, or torch.compile'd in compile mode)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device as device_of
from harness.models._pytorch import (
    ImageProbes,
    compiled,
    defined_momentum,
    device_batches,
    mixed_precision,
    optimizer_options,
    prefetch_depth,
)
from harness.models.googlenet import FEATURES, INCEPTION, POOL_AFTER, PROBE_LR, decays, init_weights
from harness.models.resnet50 import accuracy, epoch_batches, eval_batches, limits, lr_schedule, probe_batches
from harness.models.resnet50.pytorch import load_weights


class ConvBN(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int, hp: dict):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=1, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=hp["bn_eps"], momentum=hp["bn_momentum_pt"])
        self.relu = nn.ReLU()


class Inception(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, pp, hp):
        super().__init__()
        self.b1 = ConvBN(cin, c1, 1, hp)
        self.b2a, self.b2b = ConvBN(cin, c3r, 1, hp), ConvBN(c3r, c3, 3, hp)
        self.b3a, self.b3b = ConvBN(cin, c5r, 1, hp), ConvBN(c5r, c5, 3, hp)
        self.b4 = ConvBN(cin, pp, 1, hp)

    def forward(self, x):
        pooled = F.max_pool2d(x, 3, stride=1, padding=1)
        return torch.cat([self.b1(x), self.b2b(self.b2a(x)), self.b3b(self.b3a(x)), self.b4(pooled)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes: int, hp: dict):
        super().__init__()
        self.conv1, self.conv2, self.conv3 = ConvBN(3, 64, 3, hp), ConvBN(64, 64, 1, hp), ConvBN(64, 192, 3, hp)
        for name, *sizes in INCEPTION:
            setattr(self, f"inception{name}", Inception(*sizes, hp))
        self.dropout = nn.Dropout(hp["dropout"])
        self.classifier = nn.Linear(FEATURES, num_classes, bias=True)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 3, stride=2, padding=1)
        x = F.max_pool2d(self.conv3(self.conv2(x)), 3, stride=2, padding=1)
        for name, *_ in INCEPTION:
            x = getattr(self, f"inception{name}")(x)
            if name in POOL_AFTER:
                k = POOL_AFTER[name]
                x = F.max_pool2d(x, k, stride=2, padding=k // 2 if k == 3 else 0)
        return self.classifier(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


class Workload(ImageProbes):
    probe_lr = PROBE_LR

    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.data, self.seed = ctx, data, ctx.seed
        self.dev = device_of(ctx)
        self.batch = int(hp["batch"])
        self.n_train, self.n_eval = limits(ctx.cell.spec, data, self.batch)
        self.samples_per_epoch = self.n_train
        self.epoch = self.step_no = 0
        self.net = GoogLeNet(data["num_classes"], hp).to(self.dev)
        load_weights(self.net, init_weights(ctx.seed, data["num_classes"]))
        named = dict(self.net.named_parameters())
        self.opt = torch.optim.SGD([{"params": [p for n, p in named.items() if decays(n)],
                                     "weight_decay": hp["weight_decay"]},
                                    {"params": [p for n, p in named.items() if not decays(n)], "weight_decay": 0.0}],
                                   lr=hp["lr"], momentum=hp["momentum"], dampening=0.0, nesterov=False,
                                   **optimizer_options(ctx, "SGD"))
        defined_momentum(self.opt)
        self.prefetch = prefetch_depth(ctx)
        self.lrs = lr_schedule(hp["lr"], hp["warmup_epochs"], ctx.cell.spec.epochs, self.n_train // self.batch)
        self.net, self.opt, self.amp = mixed_precision(ctx, self.net, self.opt)
        self.run_net = compiled(ctx, self.net)
        probe_test, probe_x, probe_y = probe_batches(data)
        self.probe_test, self.probe_x, self.probe_y = (torch.from_numpy(a).to(self.dev)
                                                       for a in (probe_test, probe_x, probe_y))

    def _step(self, x, y, lr: float, amp: bool = True) -> torch.Tensor:
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        with self.amp.autocast(enabled=amp):
            loss = F.cross_entropy(self.run_net(x).float(), y)
        self.amp.backward(loss)
        self.amp.step()
        return loss.detach()

    def train_batches(self):
        """This epoch's training batches on the device (harness.models._pytorch.device_batches)."""
        return device_batches(self.ctx, self.dev, epoch_batches(self.data, self.epoch, self.seed, self.batch,
                                                                self.n_train),
                              lambda b: tuple(torch.from_numpy(a) for a in b),
                              lambda t, nb: tuple(a.to(self.dev, non_blocking=nb) for a in t), self.prefetch)

    def train_epoch(self) -> float:
        self.net.train()
        losses = []
        with self.train_batches() as batches:
            for x, y in batches:
                lr = float(self.lrs[min(self.step_no, len(self.lrs) - 1)])
                losses.append(self._step(x, y, lr))
                self.step_no += 1
        self.epoch += 1
        return torch.stack(losses).mean().item()

    def evaluate(self, split: str) -> float:
        """Top-1 accuracy on the first eval_samples test images ('val' and 'test' alike, as for ResNet50)."""
        self.net.eval()
        preds = []
        with torch.no_grad(), self.amp.autocast():
            for x, valid in eval_batches(self.data, self.n_eval, self.batch):
                preds.append(self.run_net(torch.from_numpy(x).to(self.dev)).argmax(1)[:valid].cpu().numpy())
        return accuracy(np.concatenate(preds), self.data["test_y"][:self.n_eval])


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Module):
    """contracts.PassesModelModule: mean cross-entropy of the logits, the loss it trains with."""
    return lambda x, y: F.cross_entropy(net(x), y)
