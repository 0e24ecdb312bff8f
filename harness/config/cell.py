"""The shared cell type, at the bottom of the harness beside `cellid.py` and `spec.py`: `Cell`, one point of the
matrix, with its settings (a `harness.config.spec` class for its kind). The matrix module makes cells; the runner, the
child process, the scenarios and the contracts read them, so this module imports nothing of the harness's above it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from harness.config.spec import SPEC_FOR_KIND, ModelSpec, OperatorSpec, Spec

PLATFORMS = ("cpu", "cuda", "ascend")   # where a cell can run: the matrix's platform axis and `--platform`


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One point of the matrix: what a single child process measures."""

    id: str
    kind: str                 # model | scaling | operator | inference | passes
    framework: str
    mode: str
    amp: str
    devices: int              # every process of the cell, over all its nodes
    repeats: int
    timeout_s: float
    seed: int
    model: str | None = None
    op: str | None = None
    nodes: int = 1            # hosts the cell runs on, devices // nodes processes on each (a multi-node run)
    spec: Spec                # the settings from the matrix file, of the class SPEC_FOR_KIND[kind]

    @property
    def dataset(self) -> str | None:
        """The dataset the cell loads (model, scaling and passes cells); None for operator and inference cells."""
        return self.spec.dataset if isinstance(self.spec, ModelSpec) else None

    @property
    def devices_per_node(self) -> int:
        return self.devices // self.nodes

    def axes(self) -> dict[str, Any]:
        op = self.spec if isinstance(self.spec, OperatorSpec) else None  # dtype and direction: operator axes
        return {"model": self.model, "op": self.op, "framework": self.framework, "mode": self.mode,
                "amp": self.amp, "devices": self.devices, "dtype": op.dtype if op else None,
                "direction": op.direction if op else None}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: self.spec.to_dict() if f.name == "spec" else getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(**{**d, "spec": SPEC_FOR_KIND[d["kind"]](**d["spec"])})
