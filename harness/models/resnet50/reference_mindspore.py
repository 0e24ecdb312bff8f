"""ResNet50 (CIFAR variant) trained the way MindSpore's model zoo trains it: nn.Cell blocks, a loss Cell
(nn.WithLossCell with SoftmaxCrossEntropyWithLogits), nn.Momentum with per-step learning rates and weight-decay
parameter groups, nn.TrainOneStepCell (ms.amp.build_train_network for AMP levels), one Tensor pair per step.
 Only the numpy initial weights, the batches and the learning-rate schedule come from harness.models.resnet50."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models.resnet50 import decays, epoch_batches, init_weights, limits, lr_schedule

LAYERS = (3, 4, 6, 3)
WIDTHS = (64, 128, 256, 512)


def _conv(cin, cout, k, stride=1):
    return nn.Conv2d(cin, cout, k, stride=stride, pad_mode="pad", padding=k // 2, has_bias=False)


def _bn(c, hp):
    return nn.BatchNorm2d(c, eps=hp["bn_eps"], momentum=1.0 - hp["bn_momentum_pt"])


class ResidualBlock(nn.Cell):
    expansion = 4

    def __init__(self, cin, width, stride, hp):
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.bn1 = _conv(cin, width, 1), _bn(width, hp)
        self.conv2, self.bn2 = _conv(width, width, 3, stride), _bn(width, hp)
        self.conv3, self.bn3 = _conv(width, cout, 1), _bn(cout, hp)
        self.relu = nn.ReLU()
        self.down = stride != 1 or cin != cout
        if self.down:
            self.down_sample = nn.SequentialCell([_conv(cin, cout, 1, stride), _bn(cout, hp)])

    def construct(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.down:
            identity = self.down_sample(x)
        return self.relu(out + identity)


class ResNet(nn.Cell):
    def __init__(self, num_classes, hp):
        super().__init__()
        self.conv1, self.bn1, self.relu = _conv(3, 64, 3), _bn(64, hp), nn.ReLU()
        stages, cin = [], 64
        for n, width, stride in zip(LAYERS, WIDTHS, (1, 2, 2, 2), strict=True):
            blocks = []
            for b in range(n):
                blocks.append(ResidualBlock(cin, width, stride if b == 0 else 1, hp))
                cin = width * ResidualBlock.expansion
            stages.append(nn.SequentialCell(blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.mean = ops.ReduceMean(keep_dims=False)
        self.end_point = nn.Dense(cin, num_classes, has_bias=True)

    def construct(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.end_point(self.mean(x, (2, 3)))


def _torch_name(name: str) -> str:
    """This network's parameter name -> init_weights' torchvision name."""
    for ms_leaf, pt_leaf in (("gamma", "weight"), ("beta", "bias"), ("moving_mean", "running_mean"),
                             ("moving_variance", "running_var")):
        if name.endswith("." + ms_leaf):
            name = name[: -len(ms_leaf)] + pt_leaf
    return name.replace("down_sample.", "downsample.").replace("end_point.", "fc.")


class Reference:
    def __init__(self, data, hp, spec, seed, amp):
        self.data, self.seed, self.batch = data, seed, int(hp["batch"])
        self.n_train, _ = limits(spec, data, self.batch)
        self.samples_per_epoch = self.n_train
        net = ResNet(data["num_classes"], hp)
        weights = init_weights(seed, data["num_classes"])
        params = {_torch_name(p.name): p for p in net.get_parameters()}
        assert set(params) == set(weights), sorted(set(params) ^ set(weights))[:5]
        ms.load_param_into_net(net, {p.name: ms.Parameter(Tensor(weights[n]), name=p.name)
                                     for n, p in params.items()}, strict_load=True)
        decay = [p for n, p in params.items() if p.requires_grad and decays(n)]
        no_decay = [p for n, p in params.items() if p.requires_grad and not decays(n)]
        lrs = lr_schedule(hp["lr"], hp["warmup_epochs"], spec.epochs, self.n_train // self.batch)
        opt = nn.Momentum([{"params": decay, "weight_decay": hp["weight_decay"]},
                           {"params": no_decay, "weight_decay": 0.0}],
                          learning_rate=Tensor(lrs), momentum=hp["momentum"])
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        if amp == "off":
            self.train_net = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
        else:  # MindSpore's documented AMP path; no loss scale on CPU
            self.train_net = ms.amp.build_train_network(net, opt, loss, level=amp, loss_scale_manager=None)
        self.train_net.set_train()

    def train_epoch(self, epoch: int) -> float:
        losses = [self.train_net(Tensor(x), Tensor(y.astype(np.int32)))
                  for x, y in epoch_batches(self.data, epoch, self.seed, self.batch, self.n_train)]
        return float(np.mean([loss.asnumpy() for loss in losses]))


def build(data, hp, spec, seed, amp, device="cpu"):
    return Reference(data, hp, spec, seed, amp)
