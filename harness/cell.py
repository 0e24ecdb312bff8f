"""The shared cell types, at the bottom of the harness beside `cellid.py`: `Cell`, one point of the matrix, and
`model_spec`, a model's settings for a profile. The matrix module makes cells; the runner, the child process, the
scenarios and the contracts read them, so this module imports nothing of the harness's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Cell:
    """One point of the matrix: what a single child process measures."""

    id: str
    kind: str                 # model | scaling | operator | inference | passes
    framework: str
    mode: str
    amp: str
    devices: int
    repeats: int
    timeout_s: float
    seed: int
    model: str | None = None
    op: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)   # model or operator settings from the file

    def axes(self) -> dict[str, Any]:
        return {"model": self.model, "op": self.op, "framework": self.framework, "mode": self.mode,
                "amp": self.amp, "devices": self.devices, **{k: self.spec.get(k) for k in ("dtype", "direction")}}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(**d)


def model_spec(mspec: dict[str, Any], profile_name: str) -> dict[str, Any]:
    """A model's table with its [profile.P] settings merged in (hparams merged key by key)."""
    over = dict(mspec.get("profile", {}).get(profile_name, {}))
    spec = {k: v for k, v in mspec.items() if k != "profile"}
    spec["hparams"] = {**spec.get("hparams", {}), **over.pop("hparams", {})}
    return spec | over
