"""GCN (Kipf & Welling, ICLR 2017): two graph convolutions, hidden 16, ReLU, dropout 0.5 before
each layer, no bias (as in the reference implementation), L2 weight decay on the first layer only
(added to the loss as weight_decay * sum(W0^2) / 2, like the reference, so both frameworks apply
exactly the same decay), Adam.
"""

from __future__ import annotations

import numpy as np

# contracts.ModelPackage: how the model trains, in the event log's words (harness.results.mlperf logs them).
MLPERF_KEYS = {"opt_name": "adam", "opt_learning_rate_decay_schedule": "constant"}

# contracts.NoAccumulationModel.
NO_ACCUMULATION = "GCN trains full-batch on one graph: there is no batch to split into micro-batches"

# contracts.NoPassesModel: the passes scenario (S4) times a fixed batch of training samples, which GCN does not have.
NO_PASSES = "GCN trains full-batch on one graph: it has no batch of 16 to time"


def glorot(rng: np.random.RandomState, fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


def init_weights(seed: int, in_dim: int, hidden: int, classes: int) -> dict[str, np.ndarray]:
    """Initial weights, made once from the seed and loaded into either framework."""
    rng = np.random.RandomState(seed)
    return {"w0": glorot(rng, in_dim, hidden), "w1": glorot(rng, hidden, classes)}


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((logits.argmax(1) == labels).mean())
