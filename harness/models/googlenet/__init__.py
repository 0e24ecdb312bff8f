"""GoogLeNet (Szegedy et al. 2015, Inception v1 widths) for CIFAR-10 (S1's CV workload: batch 128), framework-neutral.
 Architecture for 32x32 inputs, every convolution without bias and followed by BatchNorm (eps 1e-3) and ReLU
("ConvBN"): conv1 3x3/64, max-pool 3x3/2 (padding 1) -> 16x16, conv2 1x1/64, conv3 3x3/192, max-pool -> 8x8,
Inception 3a, 3b, max-pool -> 4x4, 4a-4e, max-pool 2x2/2 -> 2x2, 5a, 5b, global average pool, dropout, dense
1024 -> 10. An Inception block concatenates four branches: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 (the original's 5x5 as a 3x3,
a common CIFAR adaptation); max-pool 3x3/1 (padding 1) -> 1x1. Every max-pool's input is a ReLU output (>= 0), so
its padding value (-inf in PyTorch) cannot change a result. 5,602,474 trainable parameters, 115 parametrised
layers (`harness models`).

Both frameworks get the same initial weights from init_weights (PyTorch names) and the same batches, augmentation,
learning-rate schedule and evaluation as the CIFAR-10 ResNet50 (harness/models/resnet50: epoch_batches, eval_batches,
lr_schedule, limits); SGD with momentum, weight decay on conv and dense weights only.
"""

from __future__ import annotations

import numpy as np

from harness.models.resnet50 import NO_ACCUMULATION as NO_ACCUMULATION  # contracts.NoAccumulationModel: BatchNorm
from harness.models.resnet50 import pass_batch as pass_batch  # contracts.PassesModel: the same CIFAR-10 batch

# contracts.ModelPackage: how the model trains, in the event log's words (harness.results.mlperf logs them).
MLPERF_KEYS = {"opt_name": "sgd",
               "opt_learning_rate_decay_schedule": "linear warm-up, then cosine decay to 0 at the last epoch"}

# name, in, 1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection
INCEPTION = (("3a", 192, 64, 96, 128, 16, 32, 32), ("3b", 256, 128, 128, 192, 32, 96, 64),
             ("4a", 480, 192, 96, 208, 16, 48, 64), ("4b", 512, 160, 112, 224, 24, 64, 64),
             ("4c", 512, 128, 128, 256, 24, 64, 64), ("4d", 512, 112, 144, 288, 32, 64, 64),
             ("4e", 528, 256, 160, 320, 32, 128, 128), ("5a", 832, 256, 160, 320, 32, 128, 128),
             ("5b", 832, 384, 192, 384, 48, 128, 128))
POOL_AFTER = {"3b": 3, "4e": 2}  # max-pool kernel (stride 2) after these blocks
FEATURES = 1024
PROBE_LR = 3e-6  # the probe step's learning rate (tests): small enough to stay in the loss's linear regime


def out_channels(block: tuple) -> int:
    _, _, c1, _, c3, _, c5, pp = block
    return c1 + c3 + c5 + pp


def convs() -> list[tuple[str, int, int, int]]:
    """Every ConvBN as (name, in, out, kernel), in order, named as the PyTorch modules are."""
    out = [("conv1", 3, 64, 3), ("conv2", 64, 64, 1), ("conv3", 64, 192, 3)]
    for name, cin, c1, c3r, c3, c5r, c5, pp in INCEPTION:
        p = f"inception{name}"
        out += [(f"{p}.b1", cin, c1, 1), (f"{p}.b2a", cin, c3r, 1), (f"{p}.b2b", c3r, c3, 3),
                (f"{p}.b3a", cin, c5r, 1), (f"{p}.b3b", c5r, c5, 3), (f"{p}.b4", cin, pp, 1)]
    return out


def init_weights(seed: int, num_classes: int = 10) -> dict[str, np.ndarray]:
    """conv weights ~ N(0, 2 / (out * k * k)) (kaiming normal, fan_out); BN gamma 1, beta 0, running mean 0 and
    variance 1; dense weight and bias ~ U(-1/sqrt(1024), 1/sqrt(1024)) (nn.Linear's default)."""
    rng = np.random.RandomState(seed)
    w: dict[str, np.ndarray] = {}
    for name, cin, cout, k in convs():
        w[f"{name}.conv.weight"] = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cout * k * k))
                                    ).astype(np.float32)
        w[f"{name}.bn.weight"] = np.ones(cout, np.float32)
        w[f"{name}.bn.bias"] = np.zeros(cout, np.float32)
        w[f"{name}.bn.running_mean"] = np.zeros(cout, np.float32)
        w[f"{name}.bn.running_var"] = np.ones(cout, np.float32)
    bound = 1.0 / np.sqrt(FEATURES)
    w["classifier.weight"] = rng.uniform(-bound, bound, (num_classes, FEATURES)).astype(np.float32)
    w["classifier.bias"] = rng.uniform(-bound, bound, num_classes).astype(np.float32)
    return w


def decays(name: str) -> bool:
    """Weight decay on conv and dense weights only (PyTorch names)."""
    return name.endswith("conv.weight") or name == "classifier.weight"
