"""What a child process knows about the cell it measures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.cell import Cell


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

    @property
    def seed(self) -> int:
        return self.cell.seed

    @property
    def hparams(self) -> dict[str, Any]:
        return self.cell.spec.get("hparams", {})
