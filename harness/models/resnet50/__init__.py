"""ResNet50 for CIFAR-10 (framework-neutral parts).

Architecture (He et al. 2016, bottleneck v1.5 as torchvision: the stride is on the 3x3 conv), CIFAR
variant: stem conv 3x3/64 stride 1 padding 1 without bias, BN, ReLU and no max-pool; bottleneck stages
[3, 4, 6, 3] of widths 64, 128, 256, 512 (expansion 4), stride 2 in the first block of stages 2-4;
1x1 projection shortcut with BN where the shape changes; global average pool; dense 2048 -> 10.
23,520,842 trainable parameters; 107 parametrised layers (53 conv, 53 BN, 1 dense).

Everything both frameworks must agree on is made here in numpy, once, from the seed:
- init_weights: the initial parameters and BN buffers, named as torchvision names them;
- epoch_batches: the epoch's order and augmentation (random crop with 4-pixel zero padding, horizontal
  flip), so both frameworks train on the very same batches;
- lr_schedule: the per-step learning rates (linear warm-up, then cosine to 0 at the last step).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from harness.config.spec import ModelSpec

# contracts.ModelPackage: how the model trains, in the event log's words (harness.results.mlperf logs them).
MLPERF_KEYS = {"opt_name": "sgd",
               "opt_learning_rate_decay_schedule": "linear warm-up, then cosine decay to 0 at the last epoch"}

# contracts.NoAccumulationModel: BatchNorm makes a micro-batch a different computation, not a part of the batch's.
NO_ACCUMULATION = ("BatchNorm would normalise each micro-batch by its own statistics and move its running statistics "
                   "once per micro-batch, so an accumulated step would not be the whole batch's")

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride of the first block)
EXPANSION = 4
STEM = 64
PROBE = 8  # images in the probe batches (tests/probe_model.py)
# Learning rate of the probe step (tests only). Tiny on purpose: at initialisation, with batch statistics over
# 8 images, the gradient norm is ~160, so the loss stays in its linear regime only for steps below ~1e-5
# (lr 1e-5 already lowers the loss by 10%; lr 1e-3 to 1e-1 jump to where fp32 rounding, and so the framework,
# changes the loss after the step by 0.5-2%: PyTorch fp32 vs fp64 differ that much). At 3e-6 one step lowers
# the loss by ~5% and PyTorch fp32 and fp64 agree to 1e-7 on the loss after it.
PROBE_LR = 3e-6


def blocks() -> list[tuple[str, int, int, int, int]]:
    """Every bottleneck block as (name, in_channels, width, stride, out_channels), in order."""
    out, cin = [], STEM
    for s, (width, n, stride) in enumerate(STAGES):
        for b in range(n):
            out.append((f"layer{s + 1}.{b}", cin, width, stride if b == 0 else 1, width * EXPANSION))
            cin = width * EXPANSION
    return out


def has_projection(cin: int, stride: int, cout: int) -> bool:
    return stride != 1 or cin != cout


def init_weights(seed: int, num_classes: int = 10) -> dict[str, np.ndarray]:
    """Initial parameters and BN buffers, named as torchvision's ResNet names them:
    conv weights (out, in, kh, kw) ~ N(0, 2 / (out * kh * kw)) (kaiming_normal_, fan_out, relu, as torchvision);
    BN weight (gamma) 1, bias (beta) 0, running_mean 0, running_var 1;
    fc.weight (classes, 2048) and fc.bias ~ U(-1/sqrt(2048), 1/sqrt(2048)) (nn.Linear's default init)."""
    rng = np.random.RandomState(seed)
    w: dict[str, np.ndarray] = {}

    def conv(name, cin, cout, k):
        std = np.sqrt(2.0 / (cout * k * k))
        w[f"{name}.weight"] = (rng.standard_normal((cout, cin, k, k)) * std).astype(np.float32)

    def bn(name, c):
        w[f"{name}.weight"] = np.ones(c, np.float32)
        w[f"{name}.bias"] = np.zeros(c, np.float32)
        w[f"{name}.running_mean"] = np.zeros(c, np.float32)
        w[f"{name}.running_var"] = np.ones(c, np.float32)

    conv("conv1", 3, STEM, 3)
    bn("bn1", STEM)
    for name, cin, width, stride, cout in blocks():
        conv(f"{name}.conv1", cin, width, 1)
        bn(f"{name}.bn1", width)
        conv(f"{name}.conv2", width, width, 3)
        bn(f"{name}.bn2", width)
        conv(f"{name}.conv3", width, cout, 1)
        bn(f"{name}.bn3", cout)
        if has_projection(cin, stride, cout):
            conv(f"{name}.downsample.0", cin, cout, 1)
            bn(f"{name}.downsample.1", cout)
    fan_in = STAGES[-1][0] * EXPANSION
    bound = 1.0 / np.sqrt(fan_in)
    w["fc.weight"] = rng.uniform(-bound, bound, (num_classes, fan_in)).astype(np.float32)
    w["fc.bias"] = rng.uniform(-bound, bound, num_classes).astype(np.float32)
    return w


def decays(name: str) -> bool:
    """Weight decay applies to conv and dense weights only: not to BN gamma/beta nor to biases.
    `name` is the torchvision-style name of init_weights (BN gamma is `<bn>.weight` there)."""
    return name.endswith(".weight") and (name == "fc.weight" or ".conv" in name or name.startswith("conv")
                                         or name.endswith("downsample.0.weight"))


def past_the_end(lrs: np.ndarray, steps_per_epoch: int) -> np.ndarray:
    """The schedule followed by the profiled pass's epochs at its last rate (harness.profiling trains up to
    PROFILED_MAX_EPOCHS after the measured ones), for MindSpore's optimisers, which read lrs[global_step] and fail
    beyond the end (PyTorch's loops take lrs[min(step, len - 1)]). The measured epochs' rates are unchanged."""
    from harness.profiling import PROFILED_MAX_EPOCHS

    return np.concatenate([lrs, np.full(steps_per_epoch * PROFILED_MAX_EPOCHS, lrs[-1], dtype=lrs.dtype)])


def lr_schedule(base_lr: float, warmup_epochs: float, epochs: int, steps_per_epoch: int) -> np.ndarray:
    """Per-step learning rates (float32): linear warm-up from base/warmup_steps to base over warmup_epochs,
    then cosine decay from base to 0, reached at the last step."""
    total = max(1, epochs * steps_per_epoch)
    warm = min(int(round(warmup_epochs * steps_per_epoch)), total)
    step = np.arange(total, dtype=np.float64)
    lr = np.empty(total, np.float64)
    lr[:warm] = base_lr * (step[:warm] + 1) / max(warm, 1)
    span = max(total - warm - 1, 1)
    lr[warm:] = base_lr * 0.5 * (1 + np.cos(np.pi * (step[warm:] - warm) / span))
    return lr.astype(np.float32)


def limits(spec: ModelSpec, data: dict, batch: int, world: int = 1) -> tuple[int, int]:
    """(training images used per epoch by all ranks together, evaluation images): spec's train_samples /
    eval_samples when set, else everything; training uses whole batches only on every rank (the last partial
    batch is dropped, so every step has the same shape, which GRAPH mode compiles once). `batch` is per rank:
    data parallelism over `world` ranks keeps each device's batch and splits the epoch's images. A train_samples
    smaller than one batch on every rank (the quick profile's 32 at batch 16 over 4 ranks) is raised to one batch
    a rank: each profile's data-parallel cells are sized for the world size they run at, on one host or several."""
    n_split = len(data["train_x"])
    n_train = n_split if spec.train_samples is None else min(max(spec.train_samples, batch * world), n_split)
    n_eval = len(data["test_x"]) if spec.eval_samples is None else min(spec.eval_samples, len(data["test_x"]))
    if n_train < batch * world:
        raise ValueError(f"the training split ({n_split} images) is smaller than one batch ({batch}) on each of "
                         f"{world} ranks")
    return n_train // (batch * world) * (batch * world), n_eval


def normalise(images: np.ndarray, data: dict) -> np.ndarray:
    """uint8 NHWC -> float32 NCHW, (x / 255 - mean) / std per channel."""
    x = (images.astype(np.float32) / 255.0 - data["mean"]) / data["std"]
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=np.float32)


def pass_batch(workload, data: dict, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """contracts.PassesModel: the first `batch` training images, normalised, and their labels."""
    return normalise(data["train_x"][:batch], data), data["train_y"][:batch].astype(np.int32)


def augment(images: np.ndarray, oy: np.ndarray, ox: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """Random crop with 4-pixel zero padding (offsets oy, ox in [0, 8]) and horizontal flip, NHWC uint8."""
    n = len(images)
    padded = np.pad(images, ((0, 0), (4, 4), (4, 4), (0, 0)))
    rows = oy[:, None] + np.arange(32)
    cols = ox[:, None] + np.arange(32)
    out = padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
    out[flip] = out[flip, :, ::-1]
    return out


def epoch_batches(data: dict, epoch: int, seed: int, batch: int, n_samples: int, rank: int = 0, world: int = 1
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The epoch's training batches for one rank, (x float32 NCHW normalised, y int64), from the first
    n_samples training images. Order and augmentation come from a generator seeded by (seed, epoch) only, so
    both frameworks see identical batches and every epoch differs; with several ranks, rank r takes every
    world-th image of that order (as torch's DistributedSampler), so together they see the epoch once."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n_samples)
    oy = rng.integers(0, 9, n_samples)
    ox = rng.integers(0, 9, n_samples)
    flip = rng.random(n_samples) < 0.5
    mine = order[rank::world]
    for i in range(n_samples // (batch * world)):
        idx = mine[i * batch:(i + 1) * batch]
        images = augment(data["train_x"][idx], oy[idx], ox[idx], flip[idx])
        yield normalise(images, data), data["train_y"][idx].astype(np.int64)


def eval_batches(data: dict, n_samples: int, batch: int) -> Iterator[tuple[np.ndarray, int]]:
    """The first n_samples test images in order, normalised, no augmentation, as (x, valid) batches of
    exactly `batch` images: the last one is padded with zeros (eval-mode BN treats images independently,
    so the padding changes nothing) and `valid` says how many of its rows are real."""
    for i in range(0, n_samples, batch):
        x = normalise(data["test_x"][i:min(i + batch, n_samples)], data)
        valid = len(x)
        if valid < batch:
            x = np.concatenate([x, np.zeros((batch - valid, *x.shape[1:]), np.float32)])
        yield x, valid


def probe_batches(data: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first PROBE test images, first PROBE training images, their labels), normalised, no augmentation."""
    return (normalise(data["test_x"][:PROBE], data), normalise(data["train_x"][:PROBE], data),
            data["train_y"][:PROBE].astype(np.int64))


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    return float((predictions == labels).mean())
