"""Models: one package per model (`harness/models/<model>/`), holding the framework-neutral parts
(initial weights made with numpy from the seed, shapes) in `__init__.py` and one file per framework
(`pytorch.py`, `mindspore.py`), each a `harness.contracts.ModelModule`: `build(ctx, data) -> Workload` (trained by
scenarios/training.py).
"""

from __future__ import annotations

import importlib
from typing import cast

from harness.contracts import ModelModule


def model_module(model: str, framework: str) -> ModelModule:
    """`harness/models/<model>/<framework>.py`."""
    return cast(ModelModule, importlib.import_module(f"harness.models.{model}.{framework}"))
