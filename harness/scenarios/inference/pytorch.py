"""Inference nets in PyTorch (eager, or torch.compile'd in compile mode); AMP: torch.autocast."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.frameworks.pytorch import device, synchronize
from harness.models._pytorch import autocast, compiled
from harness.models.resnet50 import STEM
from harness.models.resnet50.pytorch import ResNet50, load_weights
from harness.scenarios.inference.nets import NETS, STEM_KERNEL

BN_MOMENTUM_PT, BN_EPS = 0.1, 1e-5  # torchvision's BatchNorm2d defaults (eval mode uses only eps)


class ResNet50ImageNet(ResNet50):
    """torchvision's layout: the CIFAR variant's blocks with a 7x7 stride-2 stem and a 3x3 stride-2 max-pool."""

    def __init__(self, num_classes: int):
        super().__init__(num_classes, BN_MOMENTUM_PT, BN_EPS)
        self.conv1 = nn.Conv2d(3, STEM, STEM_KERNEL, stride=2, padding=STEM_KERNEL // 2, bias=False)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def network(name: str, weights: dict):
    net = ResNet50ImageNet(NETS[name]["num_classes"])
    load_weights(net, weights)
    return net.eval()


def build(ctx, name: str, batch: int, weights: dict, images):
    dev = device(ctx)
    net = network(name, weights).to(dev)
    fn = compiled(ctx, net)
    x = torch.from_numpy(images).to(dev)
    last = []

    def run():
        with torch.no_grad(), autocast(ctx):
            last[:] = [fn(x)]

    return run, lambda: synchronize(ctx), net


def forward(ctx, name: str, weights: dict, images):
    """fp32 eval-mode logits (tests: the two frameworks' outputs compared)."""
    with torch.no_grad():
        return network(name, weights)(torch.from_numpy(images)).numpy()
