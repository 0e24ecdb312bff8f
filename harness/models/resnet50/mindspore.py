"""ResNet50 (CIFAR variant) in MindSpore (GRAPH or PYNATIVE, set by the back-end before this is built).
 Every MindSpore default that differs from PyTorch's is set explicitly: Conv2d pad_mode='pad' with
padding 1 (3x3) / 0 (1x1) and has_bias=False; BatchNorm2d momentum = 1 - PyTorch's momentum (MindSpore
weights the running value, PyTorch the batch value) and eps; Dense with bias. nn.Momentum's update,
v = m * v + (g + wd * p); p -= lr * v, is torch.optim.SGD's with dampening 0 and nesterov off.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from harness.models._mindspore import (
    ImageProbes,
    SunkEpochs,
    amp_network,
    dataset_sink,
    make_train_step,
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
    past_the_end,
    probe_batches,
)

# torchvision-style names (init_weights) -> MindSpore parameter names, per kind of layer.
BN_NAMES = {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean", "running_var": "moving_variance"}


def conv(w: dict, name: str, cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, stride=stride, pad_mode="pad", padding=k // 2, has_bias=False,
                     weight_init=Tensor(w[f"{name}.weight"]))


def bn(w: dict, name: str, c: int, hp: dict) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=hp["bn_eps"], momentum=1.0 - hp["bn_momentum_pt"], affine=True,
                          gamma_init=Tensor(w[f"{name}.weight"]), beta_init=Tensor(w[f"{name}.bias"]),
                          moving_mean_init=Tensor(w[f"{name}.running_mean"]),
                          moving_var_init=Tensor(w[f"{name}.running_var"]), use_batch_statistics=None)


class Bottleneck(nn.Cell):
    def __init__(self, w: dict, name: str, cin: int, width: int, stride: int, cout: int, hp: dict):
        super().__init__()
        self.conv1, self.bn1 = conv(w, f"{name}.conv1", cin, width, 1), bn(w, f"{name}.bn1", width, hp)
        self.conv2 = conv(w, f"{name}.conv2", width, width, 3, stride)  # v1.5: the stride is on the 3x3
        self.bn2 = bn(w, f"{name}.bn2", width, hp)
        self.conv3, self.bn3 = conv(w, f"{name}.conv3", width, cout, 1), bn(w, f"{name}.bn3", cout, hp)
        self.project = has_projection(cin, stride, cout)
        if self.project:
            self.downsample = nn.SequentialCell([conv(w, f"{name}.downsample.0", cin, cout, 1, stride),
                                                 bn(w, f"{name}.downsample.1", cout, hp)])
        else:
            self.downsample = nn.Identity()
        self.relu = nn.ReLU()

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.downsample(x))


class ResNet50(nn.Cell):
    def __init__(self, w: dict, num_classes: int, hp: dict):
        super().__init__()
        self.conv1, self.bn1 = conv(w, "conv1", 3, STEM, 3), bn(w, "bn1", STEM, hp)
        self.relu = nn.ReLU()
        by_stage: dict[str, list[Bottleneck]] = {}
        for name, cin, width, stride, cout in blocks():
            by_stage.setdefault(name.split(".")[0], []).append(Bottleneck(w, name, cin, width, stride, cout, hp))
        self.layer1 = nn.SequentialCell(by_stage["layer1"])
        self.layer2 = nn.SequentialCell(by_stage["layer2"])
        self.layer3 = nn.SequentialCell(by_stage["layer3"])
        self.layer4 = nn.SequentialCell(by_stage["layer4"])
        self.fc = nn.Dense(STAGES[-1][0] * 4, num_classes, has_bias=True, weight_init=Tensor(w["fc.weight"]),
                           bias_init=Tensor(w["fc.bias"]))

    def construct(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(ops.mean(x, (2, 3), False))


class LossCell(nn.Cell):
    """Mean cross-entropy over the batch, in fp32. The fused SoftmaxCrossEntropyWithLogits kernel, as MindSpore's
    model zoo uses (ops.cross_entropy composes log_softmax and nll_loss op by op, which PYNATIVE dispatches one
    at a time); the cast to fp32 only where the network computes in fp16 (AMP)."""

    def __init__(self, net: nn.Cell, cast: bool = False):
        super().__init__()
        self.net, self.cast = net, cast
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, x, y):
        logits = self.net(x)
        if self.cast:
            logits = ops.cast(logits, ms.float32)
        return self.ce(logits, y)


def torch_name(ms_name: str) -> str:
    """MindSpore parameter name (from the network's cell hierarchy) -> init_weights' (torchvision) name."""
    layer, _, leaf = ms_name.rpartition(".")
    return f"{layer}.{next((t for t, m in BN_NAMES.items() if m == leaf), leaf)}"


class Workload(ImageProbes):
    probe_lr = PROBE_LR

    def __init__(self, ctx, data: dict):
        hp = ctx.hparams
        self.ctx, self.data, self.seed = ctx, data, ctx.seed
        self.batch = int(hp["batch"])
        self.n_train, self.n_eval = limits(ctx.cell.spec, data, self.batch, ctx.world_size)
        self.samples_per_epoch = self.n_train // ctx.world_size  # this rank's share
        self.epoch = 0
        weights = init_weights(ctx.seed, data["num_classes"])
        self.net = ResNet50(weights, data["num_classes"], hp)
        named = {torch_name(n): p for n, p in self.net.parameters_and_names()}
        if set(named) != set(weights):
            raise RuntimeError(f"weight names differ: {sorted(set(named) ^ set(weights))[:5]}")
        self.buffers = [p for p in named.values() if not p.requires_grad]  # BN moving statistics
        decay = [p for n, p in named.items() if p.requires_grad and decays(n)]
        no_decay = [p for n, p in named.items() if p.requires_grad and not decays(n)]
        steps = self.n_train // (self.batch * ctx.world_size)
        self.lrs = lr_schedule(hp["lr"], hp["warmup_epochs"], ctx.cell.spec.epochs, steps)
        # Per-step learning rates: nn.Momentum takes lrs[global_step] and advances global_step by one per call.
        self.opt = nn.Momentum([{"params": decay, "weight_decay": hp["weight_decay"]},
                                {"params": no_decay, "weight_decay": 0.0}],
                               learning_rate=Tensor(past_the_end(self.lrs, steps)), momentum=hp["momentum"],
                               use_nesterov=False)
        self.fp32_loss = LossCell(self.net)
        # make_train_step: value_and_grad, loss scaling where loss_scaler(ctx) gives one (not with AMP off nor
        # on CPU), ops.depend(loss, update) so reading the loss waits for the update; ms.jit in GRAPH mode.
        self.fp32_step = make_train_step(ctx, self.fp32_loss, self.opt)
        if ctx.cell.amp == "off":
            self.run_net, self.loss_cell, self.step = self.net, self.fp32_loss, self.fp32_step
        else:
            # O2: fp16 except BatchNorm (and the loss, cast to fp32); O3: everything fp16. auto_mixed_precision
            # wraps the same Parameter objects, so the fp32 probe cells below see the trained weights.
            self.run_net = amp_network(ctx, self._share(ResNet50(weights, data["num_classes"], hp)))
            self.loss_cell = LossCell(self.run_net, cast=True)
            self.step = make_train_step(ctx, self.loss_cell, self.opt)
        # Dataset sinking (GRAPH mode on Ascend/GPU): the same batches, fed through a MindSpore dataset.
        sink, _ = dataset_sink(ctx, fixed_shapes=True)
        self.sunk = SunkEpochs(self.step, self._batches, ctx.cell.spec.epochs, steps, ["x", "y"]) if sink else None
        probe_test, probe_x, probe_y = probe_batches(data)
        self.probe_test, self.probe_x = Tensor(probe_test), Tensor(probe_x)
        self.probe_y = Tensor(probe_y.astype(np.int32))

    def _share(self, amp_net: nn.Cell) -> nn.Cell:
        """Make the AMP network use the fp32 network's Parameter objects (one set of weights, one optimiser);
        the two networks are built alike, so their parameters have the same names."""
        mine = dict(self.net.parameters_and_names())  # names from the cell hierarchy, not Parameter.name
        for cell_name, cell in amp_net.cells_and_names():
            for attr in list(cell._params):  # noqa: SLF001 - the cell's own parameters, by attribute
                setattr(cell, attr, mine[f"{cell_name}.{attr}" if cell_name else attr])
        return amp_net

    def _batches(self, epoch: int):
        """This rank's training batches of an epoch, as the step takes them (labels int32)."""
        for x, y in epoch_batches(self.data, epoch, self.seed, self.batch, self.n_train, self.ctx.rank,
                                  self.ctx.world_size):
            yield x, y.astype(np.int32)

    def train_epoch(self) -> float:
        self.run_net.set_train(True)
        self.epoch += 1
        if self.sunk is not None:
            return float(self.sunk().asnumpy())  # the epoch's last loss; asnumpy waits for the device
        losses = [self.step(Tensor(x), Tensor(y)) for x, y in self._batches(self.epoch - 1)]
        return float(np.mean([loss.asnumpy() for loss in losses]))  # asnumpy waits for the device

    def evaluate(self, split: str) -> float:
        """Top-1 accuracy on the first eval_samples test images. CIFAR-10 has no validation split, so
        'val' and 'test' both use the test set (as is usual for CIFAR-10)."""
        self.run_net.set_train(False)
        preds = [self.run_net(Tensor(x)).asnumpy().argmax(1)[:valid]
                 for x, valid in eval_batches(self.data, self.n_eval, self.batch)]
        return accuracy(np.concatenate(preds), self.data["test_y"][:self.n_eval])


def build(ctx, data: dict) -> Workload:
    return Workload(ctx, data)


def pass_loss(net: nn.Cell) -> nn.Cell:
    """contracts.PassesModelModule: the loss the network trains with, without the AMP cast (`net` is fp32)."""
    return LossCell(net)
