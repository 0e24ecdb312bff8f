"""Forward and gradient passes of a matrix model at a fixed batch (S4, Bahrampour et al.), framework-neutral parts.

One file per framework (`harness/passes/<framework>.py`) provides
    build(ctx, model, workload, arrays) -> (forward, gradient, sync)
from the model's workload (its fp32 network) and the batch `arrays` made here: `forward()` is one eval-mode pass
without gradients (S4's deployment time), `gradient()` one train-mode forward + backward that returns the parameters'
gradients without updating them (S4's gradient time).

The batch is the first `batch` training samples, unshuffled (S4: no shuffling, the same data for every framework).
GCN trains full-batch on one graph and has no batch of 16: it is not measured here.
"""

from __future__ import annotations

import os

import numpy as np

from harness.errors import Unsupported
from harness.models import resnet50

IMAGE_MODELS = ("resnet50", "googlenet")


def threads(value) -> int:
    """A thread count of the matrix: a number, or 'all' (the cores this process may run on)."""
    return len(os.sched_getaffinity(0)) if value == "all" else int(value)


def arrays(model: str, workload, data: dict, batch: int) -> tuple[np.ndarray, ...]:
    """The batch as numpy arrays, the inputs first and the targets last."""
    if model in IMAGE_MODELS:
        return resnet50.normalise(data["train_x"][:batch], data), data["train_y"][:batch].astype(np.int32)
    if model == "lstm":
        a = workload.corpus.split["train"]
        return a["ids"][:batch], a["last"][:batch], a["label"][:batch]
    if model == "gru":
        return workload.corpus.batch("train", np.arange(batch), batch)
    raise Unsupported(f"no forward/gradient batch for model '{model}' (GCN trains full-batch on one graph)")
