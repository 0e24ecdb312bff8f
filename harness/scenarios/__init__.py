"""Scenarios: how a cell of a given kind is measured (`harness/scenarios/<name>.py`, with
`run(ctx, backend, events) -> dict` called in the child and, where a cell's measurements
accumulate over time, `summarise(events, cell) -> dict` that rebuilds them from the event log,
also for a cell that died half-way)."""

from __future__ import annotations

import importlib
from types import ModuleType

SCENARIO_FOR_KIND = {"model": "training", "scaling": "training", "operator": "operator", "inference": "inference",
                     "passes": "passes"}


def for_kind(kind: str) -> ModuleType | None:
    name = SCENARIO_FOR_KIND.get(kind)
    return importlib.import_module(f"harness.scenarios.{name}") if name else None
