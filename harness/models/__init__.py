"""Models: a model is its folder (`harness/models/<model>/`, harness.conformance lists its parts): the
framework-neutral parts in `__init__.py` (initial weights made with numpy from the seed, shapes, its MLPerf keys, and
what it declares for the passes scenario: `contracts.PassesModel` or `contracts.NoPassesModel`), one file per
framework (`pytorch.py`, `mindspore.py`), each a `harness.contracts.ModelModule`: `build(ctx, data) -> Workload`
(trained by scenarios/training.py), and a `contracts.PassesModelModule` where the model has passes; its event-log rules
(`logcheck.yaml`) and its reference loops (`reference_<framework>.py`). `_pytorch.py` and
`_mindspore.py` hold what every model file of that framework builds with (AMP, training step, compilation).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import cast

from harness.contracts import ModelModule, ReferenceModule


def model_module(model: str, framework: str) -> ModelModule:
    """`harness/models/<model>/<framework>.py`."""
    return cast(ModelModule, importlib.import_module(f"harness.models.{model}.{framework}"))


def model_package(model: str) -> ModuleType:
    """`harness/models/<model>/__init__.py` (framework-neutral: it imports no framework)."""
    return importlib.import_module(f"harness.models.{model}")


def reference_module(model: str, framework: str) -> ReferenceModule:
    """`harness/models/<model>/reference_<framework>.py`: the model trained the framework's own documented way."""
    return cast(ReferenceModule, importlib.import_module(f"harness.models.{model}.reference_{framework}"))
