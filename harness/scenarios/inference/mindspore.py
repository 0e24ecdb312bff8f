"""Inference nets in MindSpore (GRAPH: the cell is compiled on its first call; PYNATIVE); AMP: auto_mixed_precision
at the cell's level (O2: fp16 but BatchNorm; O3: all fp16)."""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn, ops

from harness.models._mindspore import amp_network
from harness.models.resnet50 import STEM
from harness.models.resnet50.mindspore import ResNet50, conv
from harness.scenarios.inference.nets import NETS, STEM_KERNEL

# torchvision's BatchNorm2d defaults, in MindSpore's convention (momentum = 1 - PyTorch's); eval mode uses only eps.
HP = {"bn_momentum_pt": 0.1, "bn_eps": 1e-5}


class ResNet50ImageNet(ResNet50):
    """torchvision's layout: the CIFAR variant's blocks with a 7x7 stride-2 stem and a 3x3 stride-2 max-pool
    (pad_mode='pad', padding 1; its input is a ReLU output, >= 0, so the padding value cannot matter)."""

    def __init__(self, w: dict, num_classes: int):
        # The parent builds a 3x3 stem from w["conv1.weight"]; it is replaced by the 7x7 one right after.
        super().__init__({**w, "conv1.weight": np.zeros((STEM, 3, 3, 3), np.float32)}, num_classes, HP)
        self.conv1 = conv(w, "conv1", 3, STEM, STEM_KERNEL, stride=2)  # pad_mode='pad', padding 3, no bias
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)

    def construct(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(ops.mean(x, (2, 3), False))


def network(name: str, weights: dict):
    net = ResNet50ImageNet(weights, NETS[name]["num_classes"])
    net.set_train(False)
    return net


def build(ctx, name: str, batch: int, weights: dict, images):
    net = network(name, weights)
    run_net = amp_network(ctx, network(name, weights)) if ctx.cell.amp != "off" else net
    run_net.set_train(False)
    x = Tensor(images)
    last = []

    def run():
        last[:] = [run_net(x)]

    def sync():
        # On CPU runtime.synchronize() does nothing: reading one value back waits for the queued work.
        ops.reshape(last[0], (-1,))[0:1].asnumpy()
        if ctx.platform != "cpu":
            import mindspore as ms

            ms.runtime.synchronize()

    return run, sync, net


def forward(ctx, name: str, weights: dict, images):
    """fp32 eval-mode logits (tests: the two frameworks' outputs compared)."""
    return network(name, weights)(Tensor(images)).asnumpy()
