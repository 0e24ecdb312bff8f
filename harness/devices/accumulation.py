"""Gradient accumulation's shared pieces, framework-neutral: whether a model's training step can take its batch in
micro-batches (its package declares contracts.AccumulatingModel or NoAccumulationModel), the override that forces it
(HARNESS_ACCUMULATION_STEPS, for tests and trials), and how a cell that accumulated is named and recorded. When a
cell accumulates, and in how many micro-batches, is planned in one place (harness.devices.memory.plan) and decided,
with why, once per cell and run (harness.host.plan.Host.decide). How it trains then is its model files' (with
harness/models/_pytorch.py accumulate and _mindspore.py Accumulating)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from harness import contracts
from harness.errors import HarnessError

FORCE = "HARNESS_ACCUMULATION_STEPS"   # =k: every accumulating model's cells in k micro-batches, whatever the memory


def forced_steps() -> int | None:
    """HARNESS_ACCUMULATION_STEPS as a number of micro-batches; None where it is not set."""
    raw = os.environ.get(FORCE, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise HarnessError(f"{FORCE}={raw!r}: give the micro-batches a training step takes its batch in, a whole "
                           f"number from 1 (2: two halves), or unset it")
    return int(raw)


def refusal(model: str) -> str | None:
    """Why the model's training step cannot take its batch in micro-batches (its NO_ACCUMULATION), or None. The model
    package is a plug-in, loaded by its name as harness.models.model_package loads it (it imports no framework)."""
    package = importlib.import_module(f"harness.models.{model}")
    if isinstance(package, contracts.AccumulatingModel):
        return None
    if isinstance(package, contracts.NoAccumulationModel):
        return package.NO_ACCUMULATION
    return "it declares no micro_batches (contracts.AccumulatingModel)"


def label(batch: int, steps: int) -> str:
    """How `harness list`, the runner and the report name an accumulated step."""
    return f"batch {batch} as {steps} x {batch // steps} accumulated"


def settings(steps: int, batch: Any, why: str | None) -> dict[str, Any]:
    """What a training cell's result records of it (its settings, in the child): the micro-batches a step and, where
    it accumulates, their size and `why`, as the runner decided it (the child's spec)."""
    if steps == 1 or not batch:
        return {"accumulation_steps": steps}
    return {"accumulation_steps": steps, "micro_batch": int(batch) // steps, "accumulation_why": why}


def recorded(settings: dict[str, Any] | None) -> str | None:
    """The label of a result that accumulated (its settings, as `settings` made them), with the override where it
    asked for it; None for one that did not."""
    s = settings or {}
    steps, micro, why = s.get("accumulation_steps") or 1, s.get("micro_batch"), s.get("accumulation_why")
    if steps == 1 or not micro:
        return None
    return label(steps * micro, steps) + (f" ({why})" if why and why != "device memory" else "")
