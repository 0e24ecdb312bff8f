"""GoogLeNet for CIFAR-10 in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built).
 MindSpore defaults that differ from PyTorch's, set explicitly: Conv2d pad_mode='pad' with padding k // 2 and
has_bias=False; BatchNorm2d momentum = 1 - PyTorch's and eps; MaxPool2d pad_mode='pad' with PyTorch's padding; Dense
with bias; Dropout p (the probability of dropping, as PyTorch's). nn.Momentum's update is torch.optim.SGD's with
dampening 0 and nesterov off.
"""

from __future__ import annotations

import numpy as np
from mindspore import Tensor, nn, ops

from harness.models._mindspore import ImageProbes, amp_network, make_train_step
from harness.models.googlenet import FEATURES, INCEPTION, POOL_AFTER, PROBE_LR, decays, init_weights
from harness.models.resnet50 import (
    accuracy,
    epoch_batches,
    eval_batches,
    limits,
    lr_schedule,
    past_the_end,
    probe_batches,
)
from harness.models.resnet50.mindspore import LossCell, torch_name  # the same loss and parameter names


class ConvBN(nn.Cell):
    def __init__(self, w: dict, name: str, cin: int, cout: int, k: int, hp: dict):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=1, pad_mode="pad", padding=k // 2, has_bias=False,
                              weight_init=Tensor(w[f"{name}.conv.weight"]))
        self.bn = nn.BatchNorm2d(cout, eps=hp["bn_eps"], momentum=1.0 - hp["bn_momentum_pt"], affine=True,
                                 gamma_init=Tensor(w[f"{name}.bn.weight"]), beta_init=Tensor(w[f"{name}.bn.bias"]),
                                 moving_mean_init=Tensor(w[f"{name}.bn.running_mean"]),
                                 moving_var_init=Tensor(w[f"{name}.bn.running_var"]), use_batch_statistics=None)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))


class Inception(nn.Cell):
    def __init__(self, w, p, cin, c1, c3r, c3, c5r, c5, pp, hp):
        super().__init__()
        self.b1 = ConvBN(w, f"{p}.b1", cin, c1, 1, hp)
        self.b2a, self.b2b = ConvBN(w, f"{p}.b2a", cin, c3r, 1, hp), ConvBN(w, f"{p}.b2b", c3r, c3, 3, hp)
        self.b3a, self.b3b = ConvBN(w, f"{p}.b3a", cin, c5r, 1, hp), ConvBN(w, f"{p}.b3b", c5r, c5, 3, hp)
        self.b4 = ConvBN(w, f"{p}.b4", cin, pp, 1, hp)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=1, pad_mode="pad", padding=1)

    def construct(self, x):
        return ops.cat((self.b1(x), self.b2b(self.b2a(x)), self.b3b(self.b3a(x)), self.b4(self.pool(x))), 1)


class GoogLeNet(nn.Cell):
    def __init__(self, w: dict, num_classes: int, hp: dict):
        super().__init__()
        self.conv1, self.conv2 = ConvBN(w, "conv1", 3, 64, 3, hp), ConvBN(w, "conv2", 64, 64, 1, hp)
        self.conv3 = ConvBN(w, "conv3", 64, 192, 3, hp)
        self.pool3 = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)
        self.pool2 = nn.MaxPool2d(kernel_size=2, stride=2, pad_mode="valid")
        self.blocks = nn.CellList([Inception(w, f"inception{name}", *sizes, hp) for name, *sizes in INCEPTION])
        self.pool_after = tuple(POOL_AFTER.get(name, 0) for name, *_ in INCEPTION)
        self.dropout = nn.Dropout(p=hp["dropout"])
        self.classifier = nn.Dense(FEATURES, num_classes, has_bias=True, weight_init=Tensor(w["classifier.weight"]),
                                   bias_init=Tensor(w["classifier.bias"]))

    def construct(self, x):
        x = self.pool3(self.conv1(x))
        x = self.pool3(self.conv3(self.conv2(x)))
        for i, block in enumerate(self.blocks):
            x = block(x)
            k = self.pool_after[i]
            if k == 3:
                x = self.pool3(x)
            elif k == 2:
                x = self.pool2(x)
        return self.classifier(self.dropout(ops.mean(x, (2, 3), False)))


def pt_name(ms_name: str) -> str:
    """MindSpore parameter name -> init_weights' (PyTorch) name: blocks.i -> inceptionNAME, BN leaf names."""
    parts = ms_name.split(".")
    if parts[0] == "blocks":
        parts[:2] = [f"inception{INCEPTION[int(parts[1])][0]}"]
    return torch_name(".".join(parts))


class Workload(ImageProbes):
    probe_lr = PROBE_LR

    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.data, self.seed = ctx, data, ctx.seed
        self.batch = int(hp["batch"])
        self.n_train, self.n_eval = limits(ctx.cell.spec, data, self.batch)
        self.samples_per_epoch = self.n_train
        self.epoch = 0
        weights = init_weights(ctx.seed, data["num_classes"])
        self.net = GoogLeNet(weights, data["num_classes"], hp)
        named = {pt_name(n): p for n, p in self.net.parameters_and_names()}
        if set(named) != set(weights):
            raise RuntimeError(f"weight names differ: {sorted(set(named) ^ set(weights))[:5]}")
        self.buffers = [p for p in named.values() if not p.requires_grad]
        self.lrs = lr_schedule(hp["lr"], hp["warmup_epochs"], ctx.cell.spec.epochs, self.n_train // self.batch)
        self.opt = nn.Momentum([{"params": [p for n, p in named.items() if p.requires_grad and decays(n)],
                                 "weight_decay": hp["weight_decay"]},
                                {"params": [p for n, p in named.items() if p.requires_grad and not decays(n)],
                                 "weight_decay": 0.0}],
                               learning_rate=Tensor(past_the_end(self.lrs, self.n_train // self.batch)),
                               momentum=hp["momentum"], use_nesterov=False)
        self.fp32_loss = LossCell(self.net)
        self.fp32_step = make_train_step(ctx, self.fp32_loss, self.opt)
        if ctx.cell.amp == "off":
            self.run_net, self.step = self.net, self.fp32_step
        else:  # auto_mixed_precision casts the cells in place: the probes run with AMP off only
            self.run_net = amp_network(ctx, self.net)
            self.step = make_train_step(ctx, LossCell(self.run_net, cast=True), self.opt)
        probe_test, probe_x, probe_y = probe_batches(data)
        self.probe_test, self.probe_x = Tensor(probe_test), Tensor(probe_x)
        self.probe_y = Tensor(probe_y.astype(np.int32))

    def train_epoch(self) -> float:
        self.net.set_train(True)
        losses = [self.step(Tensor(x), Tensor(y.astype(np.int32)))
                  for x, y in epoch_batches(self.data, self.epoch, self.seed, self.batch, self.n_train)]
        self.epoch += 1
        return float(np.mean([loss.asnumpy() for loss in losses]))

    def evaluate(self, split: str) -> float:
        self.net.set_train(False)
        preds = [self.run_net(Tensor(x)).asnumpy().argmax(1)[:valid]
                 for x, valid in eval_batches(self.data, self.n_eval, self.batch)]
        return accuracy(np.concatenate(preds), self.data["test_y"][:self.n_eval])


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Cell) -> nn.Cell:
    """contracts.PassesModelModule: ResNet50's loss, as training uses it, without the AMP cast (`net` is fp32)."""
    return LossCell(net)
