"""Framework back-ends: one module per framework (`harness/frameworks/<name>.py`), each providing every
function of `harness.contracts.Backend` (process_env, launch_argv, rank_from_env, setup, synchronize, versions,
peak_memory_mb, reserved_memory_mb, parameter_count, layer_count); tests/test_contracts.py checks them. Only those live
here (and PyTorch's device(), which its setup uses): what model files build with is in harness/models/_<name>.py.
 Adding a framework means adding one such module, one file per model, and its operators/, passes/ and inference/
files (contracts.OperatorModule, PassesModule, InferenceModule).
"""

from __future__ import annotations

import importlib
from typing import cast

from harness.contracts import Backend
from harness.errors import HarnessError


def backend(name: str) -> Backend:
    try:
        return cast(Backend, importlib.import_module(f"harness.frameworks.{name}"))
    except ModuleNotFoundError as e:
        if e.name == f"harness.frameworks.{name}":
            raise HarnessError(f"framework '{name}' has no back-end harness/frameworks/{name}.py; add one") from None
        raise
