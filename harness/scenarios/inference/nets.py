"""Inference nets (S1 Table 4, S2's feature extraction), framework-neutral parts.

One file per framework (`harness/scenarios/inference/<framework>.py`, a `contracts.InferenceModule`) provides
    build(ctx, name, batch, weights, images) -> (run, sync, net)
where `run()` is one forward pass of the batch in eval mode without gradients, at the cell's AMP level, `sync()`
waits for it, and `net` is the fp32 network the back-end's `parameter_count` / `layer_count` measure; and
`network(name, weights)` and `forward(ctx, name, weights, images)`, which the tests compare across frameworks.
 `resnet50_imagenet`: ResNet-50 in torchvision's layout at ImageNet shape: 7x7/64 stride-2 stem convolution without
bias, BN, ReLU, 3x3 stride-2 max-pool (padding 1), the bottleneck stages of harness/models/resnet50 (v1.5: stride on
the 3x3), global average pool, dense 2048 -> 1000. 25,557,032 parameters, as torchvision.models.resnet50. It is the
CIFAR variant of harness/models/resnet50 with the stem replaced and the max-pool added (same blocks, same weight names).
 Images are synthetic (N(0, 1) float32, made once from the seed): the time of a forward pass of a dense convolutional
network does not depend on the pixel values, only on the shape.
"""

from __future__ import annotations

import importlib
from typing import cast

import numpy as np

from harness.contracts import InferenceModule
from harness.models import resnet50

NETS = {"resnet50_imagenet": {"image": 224, "num_classes": 1000, "parameters": 25_557_032}}
STEM_KERNEL = 7


def module(framework: str) -> InferenceModule:
    """`harness/scenarios/inference/<framework>.py`."""
    return cast(InferenceModule, importlib.import_module(f"harness.scenarios.inference.{framework}"))


def input_shape(name: str, batch: int) -> tuple[int, int, int, int]:
    size = NETS[name]["image"]
    return (batch, 3, size, size)


def weights(name: str, seed: int) -> dict[str, np.ndarray]:
    """The CIFAR ResNet-50's initial weights for 1000 classes, with the 7x7 stem convolution drawn as its other
    convolutions are (kaiming normal, fan_out, relu)."""
    w = resnet50.init_weights(seed, NETS[name]["num_classes"])
    rng = np.random.RandomState([seed, STEM_KERNEL])
    std = np.sqrt(2.0 / (resnet50.STEM * STEM_KERNEL ** 2))
    w["conv1.weight"] = (rng.standard_normal((resnet50.STEM, 3, STEM_KERNEL, STEM_KERNEL)) * std).astype(np.float32)
    return w


def images(name: str, seed: int, batch: int) -> np.ndarray:
    return np.random.RandomState(seed).standard_normal(input_shape(name, batch)).astype(np.float32)
