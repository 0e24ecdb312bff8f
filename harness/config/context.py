"""What a child process knows about the cell it measures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.config.cell import Cell
from harness.config.spec import ModelSpec


@dataclass
class CellContext:
    cell: Cell
    platform: str              # cpu | cuda | ascend
    repeat: int
    data_folder: str | None    # verified dataset folder, or None with synthetic data
    synthetic: bool
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    settings: dict[str, Any] = field(default_factory=dict)   # per-framework process settings applied
    profile_dir: str | None = None   # where the profiled pass keeps its profiler's output (None: no profiled pass)
    # an operator cell timed by turns with its partners (harness.scenarios.operator.turns), or None
    turns: dict[str, Any] | None = None
    # Micro-batches a training step takes its batch in (gradient accumulation; harness.devices.memory.plan): 1, the
    # whole batch at once, unless the device cannot hold it.
    accumulation_steps: int = 1

    @property
    def seed(self) -> int:
        return self.cell.seed

    @property
    def hparams(self) -> Mapping[str, Any]:
        """The model's hyperparameters (read-only); none for a cell that builds no matrix model."""
        return self.cell.spec.hparams if isinstance(self.cell.spec, ModelSpec) else {}
