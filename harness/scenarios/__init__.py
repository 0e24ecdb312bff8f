"""Scenarios: how a cell of a given kind is measured (`harness/scenarios/<name>.py`), each a
`harness.contracts.Scenario`: `run(ctx, backend, events) -> dict` called in the child, and
`summarise(events, cell) -> dict` that rebuilds the measurements from the event log in the parent, also
for a cell that died half-way ({} where the child's result holds them all)."""

from __future__ import annotations

import importlib
from typing import cast

from harness.contracts import Scenario

SCENARIO_FOR_KIND = {"model": "training", "scaling": "training", "operator": "operator", "inference": "inference",
                     "passes": "passes"}


def for_kind(kind: str) -> Scenario | None:
    name = SCENARIO_FOR_KIND.get(kind)
    return cast(Scenario, importlib.import_module(f"harness.scenarios.{name}")) if name else None
