"""Framework back-ends: one module per framework (`harness/frameworks/<name>.py`), each with

    process_env(platform) -> dict   environment variables the child process starts with
                                     (must not import the framework: the parent calls it)
    setup(ctx) -> dict              in the child: mode, device, seed, threads; returns the
                                     settings applied, which go into the cell's result
    synchronize(ctx)                wait for all queued device work (called before reading a clock)
    versions() -> dict              versions of the framework and its device stack

Adding a framework means adding one such module and one file per model.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from harness.errors import HarnessError


def backend(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"harness.frameworks.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"harness.frameworks.{name}":
            raise HarnessError(f"framework '{name}' has no back-end harness/frameworks/{name}.py; add one") from None
        raise
