"""ResNet50 (CIFAR variant) trained the way PyTorch's examples train it: a torchvision-style nn.Module, SGD with
momentum and weight-decay parameter groups, the standard loop (zero_grad(set_to_none=True), forward, loss,
backward, step), torch.autocast for AMP (bf16 on CPU), and channels_last, as PyTorch's performance tuning guide
recommends for convolutional networks. Given a CUDA device, PyTorch's documented GPU way: a DataLoader worker
building the batches ahead into pinned memory (gpu_batches), non_blocking copies, the fused SGD, and AMP as
torch.autocast("cuda", float16) with a GradScaler.

Only the numpy initial weights, the batches and the learning-rate schedule come from harness.models.resnet50."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.models._reference_pytorch import amp_tools, gpu_batches
from harness.models.resnet50 import decays, epoch_batches, init_weights, limits, lr_schedule

LAYERS = (3, 4, 6, 3)
WIDTHS = (64, 128, 256, 512)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride, momentum, eps):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width, eps=eps, momentum=momentum)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width, eps=eps, momentum=momentum)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout, eps=eps, momentum=momentum)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout, eps=eps, momentum=momentum))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, num_classes, momentum, eps):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64, eps=eps, momentum=momentum)
        cin = 64
        for i, (n, width, stride) in enumerate(zip(LAYERS, WIDTHS, (1, 2, 2, 2), strict=True)):
            blocks = []
            for b in range(n):
                blocks.append(Bottleneck(cin, width, stride if b == 0 else 1, momentum, eps))
                cin = width * Bottleneck.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Reference:
    def __init__(self, data, hp, spec, seed, amp, device="cpu"):
        self.data, self.seed, self.batch, self.amp = data, seed, int(hp["batch"]), amp != "off"
        self.device = torch.device(device)
        self.n_train, _ = limits(spec, data, self.batch)
        self.samples_per_epoch = self.n_train
        self.model = ResNet(data["num_classes"], hp["bn_momentum_pt"], hp["bn_eps"])
        weights = init_weights(seed, data["num_classes"])
        self.model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
        self.model = self.model.to(self.device, memory_format=torch.channels_last)
        named = dict(self.model.named_parameters())
        self.opt = torch.optim.SGD([{"params": [p for n, p in named.items() if decays(n)],
                                     "weight_decay": hp["weight_decay"]},
                                    {"params": [p for n, p in named.items() if not decays(n)], "weight_decay": 0.0}],
                                   lr=hp["lr"], momentum=hp["momentum"],
                                   **({"fused": True} if self.device.type == "cuda" else {}))
        self.autocast, self.scaler = amp_tools(self.device, self.amp)
        if self.device.type == "cuda":
            # Fused SGD leaves its momentum buffers uninitialised when GradScaler skips its first step (fp16's first
            # loss scales overflow), and later updates are NaN; zero buffers give the same first update (dampening 0).
            for p in self.model.parameters():
                self.opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        self.lrs = lr_schedule(hp["lr"], hp["warmup_epochs"], spec.epochs, self.n_train // self.batch)
        self.step_no = 0

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        losses = []
        for x, y in gpu_batches(self.device, epoch_batches(self.data, epoch, self.seed, self.batch, self.n_train)):
            for group in self.opt.param_groups:
                group["lr"] = float(self.lrs[min(self.step_no, len(self.lrs) - 1)])
            self.opt.zero_grad(set_to_none=True)
            images = torch.as_tensor(x).to(self.device, memory_format=torch.channels_last, non_blocking=True)
            labels = torch.as_tensor(y).to(self.device, non_blocking=True)
            with self.autocast:
                loss = F.cross_entropy(self.model(images).float(), labels)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
            losses.append(loss.detach())
            self.step_no += 1
        return torch.stack(losses).mean().item()


def build(data, hp, spec, seed, amp, device="cpu"):
    return Reference(data, hp, spec, seed, amp, device)
