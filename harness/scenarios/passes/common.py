"""Forward and gradient passes of a matrix model at a fixed batch (S4, Bahrampour et al.), framework-neutral parts.
 One file per framework (`harness/scenarios/passes/<framework>.py`, a `contracts.PassesModule`) provides
    build(ctx, model, workload, arrays) -> (forward, gradient, sync)
from the model's workload (its fp32 network), its model file's loss (`model.pass_loss`) and the batch `arrays`:
`forward()` is one eval-mode pass without gradients (S4's deployment time), `gradient()` one train-mode forward +
backward that returns the parameters' gradients without updating them (S4's gradient time).

What differs between models is declared by the model (harness/contracts.py): its package's `pass_batch`, the first
`batch` training samples, unshuffled (S4: no shuffling, the same data for every framework), and its model files'
`pass_loss`; or `NO_PASSES`, why it has none (GCN trains full-batch on one graph and has no batch of 16).
"""

from __future__ import annotations

import importlib
import os
from typing import cast

from harness.contracts import NoPassesModel, PassesModel, PassesModelModule, PassesModule
from harness.errors import Unsupported
from harness.models import model_module, model_package


def threads(value) -> int:
    """A thread count of the matrix: a number, or 'all' (the cores this process may run on)."""
    return len(os.sched_getaffinity(0)) if value == "all" else int(value)


def module(framework: str) -> PassesModule:
    """`harness/scenarios/passes/<framework>.py`."""
    return cast(PassesModule, importlib.import_module(f"harness.scenarios.passes.{framework}"))


def model_parts(model: str, framework: str) -> tuple[PassesModel, PassesModelModule]:
    """What the model provides for the passes: its package (pass_batch) and its framework's model file (build,
    pass_loss). Unsupported, with the model's own reason, for a model that declares it has none; raised before any
    framework code of the model is imported."""
    package = model_package(model)
    if isinstance(package, NoPassesModel):
        raise Unsupported(package.NO_PASSES)
    if not isinstance(package, PassesModel):  # tests/test_contracts.py fails for such a model
        raise Unsupported(f"no forward/gradient batch for model '{model}' (GCN trains full-batch on one graph)")
    return package, cast(PassesModelModule, model_module(model, framework))
