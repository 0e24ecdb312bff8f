"""GoogLeNet (Inception v1 with BN, CIFAR variant) trained the way PyTorch's examples train it: a torchvision-style
nn.Module (BasicConv2d blocks, Inception with nn.Sequential branches, nn.MaxPool2d / nn.AdaptiveAvgPool2d modules,
dropout and an fc head), SGD with momentum and weight-decay parameter groups, the standard loop
(zero_grad(set_to_none=True), forward, loss, backward, step), torch.autocast for AMP (bf16 on CPU). Contiguous
(NCHW) memory format, as the harness's GoogLeNet trains (only its ResNet50 uses channels_last). Given a CUDA device,
PyTorch's documented GPU way: a DataLoader worker building batches ahead into pinned memory, non_blocking copies,
the fused SGD, torch.autocast("cuda", float16) with a GradScaler.

Only the numpy initial weights, the architecture's widths, the batches and the learning-rate schedule come from
harness.models.googlenet and harness.models.resnet50 (CIFAR-10 data handling)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.models._reference_pytorch import amp_tools, gpu_batches
from harness.models.googlenet import FEATURES, INCEPTION, decays, init_weights
from harness.models.resnet50 import epoch_batches, limits, lr_schedule


class BasicConv2d(nn.Module):
    def __init__(self, cin, cout, k, momentum, eps):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=eps, momentum=momentum)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    def __init__(self, cin, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj, momentum, eps):
        super().__init__()
        self.branch1 = BasicConv2d(cin, ch1x1, 1, momentum, eps)
        self.branch2 = nn.Sequential(BasicConv2d(cin, ch3x3red, 1, momentum, eps),
                                     BasicConv2d(ch3x3red, ch3x3, 3, momentum, eps))
        # the original's 5x5 branch as a 3x3, as the harness (a common CIFAR adaptation)
        self.branch3 = nn.Sequential(BasicConv2d(cin, ch5x5red, 1, momentum, eps),
                                     BasicConv2d(ch5x5red, ch5x5, 3, momentum, eps))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1),
                                     BasicConv2d(cin, pool_proj, 1, momentum, eps))

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes, momentum, eps, dropout):
        super().__init__()
        self.conv1 = BasicConv2d(3, 64, 3, momentum, eps)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = BasicConv2d(64, 64, 1, momentum, eps)
        self.conv3 = BasicConv2d(64, 192, 3, momentum, eps)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, padding=1)
        blocks = {name: Inception(*sizes, momentum, eps) for name, *sizes in INCEPTION}
        self.inception3a, self.inception3b = blocks["3a"], blocks["3b"]
        self.maxpool3 = nn.MaxPool2d(3, stride=2, padding=1)
        self.inception4a, self.inception4b, self.inception4c = blocks["4a"], blocks["4b"], blocks["4c"]
        self.inception4d, self.inception4e = blocks["4d"], blocks["4e"]
        self.maxpool4 = nn.MaxPool2d(2, stride=2)
        self.inception5a, self.inception5b = blocks["5a"], blocks["5b"]
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(FEATURES, num_classes)

    def forward(self, x):
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4c(self.inception4b(self.inception4a(x)))
        x = self.maxpool4(self.inception4e(self.inception4d(x)))
        x = self.inception5b(self.inception5a(x))
        return self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))


BRANCHES = {"branch1.": "b1.", "branch2.0.": "b2a.", "branch2.1.": "b2b.", "branch3.0.": "b3a.", "branch3.1.": "b3b.",
            "branch4.1.": "b4."}


def harness_name(name: str) -> str:
    """This network's parameter/buffer name -> init_weights' name (inception3a.branch2.0.conv.weight ->
    inception3a.b2a.conv.weight, fc.* -> classifier.*)."""
    for ours, theirs in BRANCHES.items():
        name = name.replace(ours, theirs)
    return name.replace("fc.", "classifier.") if name.startswith("fc.") else name


class Reference:
    def __init__(self, data, hp, spec, seed, amp, device="cpu"):
        self.data, self.seed, self.batch, self.amp = data, seed, int(hp["batch"]), amp != "off"
        self.device = torch.device(device)
        self.n_train, _ = limits(spec, data, self.batch)
        self.samples_per_epoch = self.n_train
        self.model = GoogLeNet(data["num_classes"], hp["bn_momentum_pt"], hp["bn_eps"], hp["dropout"])
        weights = init_weights(seed, data["num_classes"])
        state = {n: torch.from_numpy(weights[harness_name(n)]) for n in self.model.state_dict()
                 if not n.endswith("num_batches_tracked")}
        assert len(state) == len(weights), "every initial weight is loaded"
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        assert not unexpected and all(n.endswith("num_batches_tracked") for n in missing), (missing, unexpected)
        self.model.to(self.device)
        named = dict(self.model.named_parameters())
        self.opt = torch.optim.SGD([{"params": [p for n, p in named.items() if decays(harness_name(n))],
                                     "weight_decay": hp["weight_decay"]},
                                    {"params": [p for n, p in named.items() if not decays(harness_name(n))],
                                     "weight_decay": 0.0}],
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
            x, y = (torch.as_tensor(a).to(self.device, non_blocking=True) for a in (x, y))
            with self.autocast:
                loss = F.cross_entropy(self.model(x).float(), y)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
            losses.append(loss.detach())
            self.step_no += 1
        return torch.stack(losses).mean().item()


def build(data, hp, spec, seed, amp, device="cpu"):
    return Reference(data, hp, spec, seed, amp, device)
