"""Models: one package per model (`harness/models/<model>/`), holding the framework-neutral parts
(initial weights made with numpy from the seed, shapes, and what the model declares for the passes scenario:
`contracts.PassesModel` or `contracts.NoPassesModel`) in `__init__.py` and one file per framework
(`pytorch.py`, `mindspore.py`), each a `harness.contracts.ModelModule`: `build(ctx, data) -> Workload` (trained by
scenarios/training.py), and a `contracts.PassesModelModule` where the model has passes. `_pytorch.py` and
`_mindspore.py` hold what every model file of that framework builds with (AMP, training step, compilation).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import cast

from harness.contracts import ModelModule


def model_module(model: str, framework: str) -> ModelModule:
    """`harness/models/<model>/<framework>.py`."""
    return cast(ModelModule, importlib.import_module(f"harness.models.{model}.{framework}"))


def model_package(model: str) -> ModuleType:
    """`harness/models/<model>/__init__.py` (framework-neutral: it imports no framework)."""
    return importlib.import_module(f"harness.models.{model}")
