"""GoogLeNet (Inception v1 with BN, CIFAR variant) trained the way MindSpore's model zoo trains it
(models/official/cv/googlenet): Conv2dBlock and Inception nn.Cells with nn.SequentialCell branches, nn.MaxPool2d
cells, ops.Concat, a ReduceMean + Flatten head, a loss Cell (nn.WithLossCell with SoftmaxCrossEntropyWithLogits),
nn.Momentum with per-step learning rates and weight-decay parameter groups, nn.TrainOneStepCell
(ms.amp.build_train_network for AMP levels), one Tensor pair per step; GRAPH or PYNATIVE as the caller set.
 The strided max-pools are padded as PyTorch pads them (pad_mode='pad', padding 1), not 'same' as the zoo's: 'same'
pads the bottom/right only and would pool other windows than the harness's network.

Only the numpy initial weights, the architecture's widths, the batches and the learning-rate schedule come from
harness.models.googlenet and harness.models.resnet50 (CIFAR-10 data handling)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models.googlenet import FEATURES, INCEPTION, decays, init_weights
from harness.models.resnet50 import epoch_batches, limits, lr_schedule


class Conv2dBlock(nn.Cell):
    def __init__(self, cin, cout, k, hp):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=1, pad_mode="pad", padding=k // 2, has_bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=hp["bn_eps"], momentum=1.0 - hp["bn_momentum_pt"])
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))


class Inception(nn.Cell):
    def __init__(self, cin, out_channels, hp):
        super().__init__()
        c1, c3r, c3, c5r, c5, pp = out_channels
        self.b1 = Conv2dBlock(cin, c1, 1, hp)
        self.b2 = nn.SequentialCell([Conv2dBlock(cin, c3r, 1, hp), Conv2dBlock(c3r, c3, 3, hp)])
        # the original's 5x5 branch as a 3x3, as the harness (a common CIFAR adaptation)
        self.b3 = nn.SequentialCell([Conv2dBlock(cin, c5r, 1, hp), Conv2dBlock(c5r, c5, 3, hp)])
        self.b4 = nn.SequentialCell([nn.MaxPool2d(kernel_size=3, stride=1, pad_mode="same"),
                                     Conv2dBlock(cin, pp, 1, hp)])
        self.concat = ops.Concat(axis=1)

    def construct(self, x):
        return self.concat((self.b1(x), self.b2(x), self.b3(x), self.b4(x)))


def _pool(k):
    return nn.MaxPool2d(kernel_size=k, stride=2, pad_mode="pad", padding=k // 2 if k == 3 else 0)


class GoogLeNet(nn.Cell):
    def __init__(self, num_classes, hp):
        super().__init__()
        blocks = {name: Inception(cin, sizes, hp) for name, cin, *sizes in INCEPTION}
        self.conv1 = Conv2dBlock(3, 64, 3, hp)
        self.maxpool1 = _pool(3)
        self.conv2 = Conv2dBlock(64, 64, 1, hp)
        self.conv3 = Conv2dBlock(64, 192, 3, hp)
        self.maxpool2 = _pool(3)
        self.block3a, self.block3b = blocks["3a"], blocks["3b"]
        self.maxpool3 = _pool(3)
        self.block4a, self.block4b, self.block4c = blocks["4a"], blocks["4b"], blocks["4c"]
        self.block4d, self.block4e = blocks["4d"], blocks["4e"]
        self.maxpool4 = _pool(2)
        self.block5a, self.block5b = blocks["5a"], blocks["5b"]
        self.mean = ops.ReduceMean(keep_dims=True)
        self.dropout = nn.Dropout(p=hp["dropout"])
        self.flatten = nn.Flatten()
        self.classifier = nn.Dense(FEATURES, num_classes, has_bias=True)

    def construct(self, x):
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.block3b(self.block3a(x)))
        x = self.block4c(self.block4b(self.block4a(x)))
        x = self.maxpool4(self.block4e(self.block4d(x)))
        x = self.block5b(self.block5a(x))
        return self.classifier(self.dropout(self.flatten(self.mean(x, (2, 3)))))


LEAVES = {"gamma": "weight", "beta": "bias", "moving_mean": "running_mean", "moving_variance": "running_var"}
BRANCHES = {"b2.0.": "b2a.", "b2.1.": "b2b.", "b3.0.": "b3a.", "b3.1.": "b3b.", "b4.1.": "b4."}


def harness_name(name: str) -> str:
    """This network's parameter name -> init_weights' (PyTorch) name: block3a.b2.0.bn.gamma ->
    inception3a.b2a.bn.weight."""
    layer, _, leaf = name.rpartition(".")
    name = f"{layer}.{LEAVES.get(leaf, leaf)}"
    for ours, theirs in BRANCHES.items():
        name = name.replace(ours, theirs)
    return name.replace("block", "inception", 1)


class Reference:
    def __init__(self, data, hp, spec, seed, amp):
        self.data, self.seed, self.batch = data, seed, int(hp["batch"])
        self.n_train, _ = limits(spec, data, self.batch)
        self.samples_per_epoch = self.n_train
        net = GoogLeNet(data["num_classes"], hp)
        weights = init_weights(seed, data["num_classes"])
        params = {harness_name(p.name): p for p in net.get_parameters()}
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
