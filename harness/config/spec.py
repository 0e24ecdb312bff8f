"""A cell's settings, typed, one class per kind of cell: `ModelSpec` (model and scaling cells), `OperatorSpec`,
`InferenceSpec` and `PassesSpec` (a `ModelSpec`: a passes cell builds the model from its settings).

Each setting's type is declared here once. The matrix check (matrix_check.py) derives the keys and value types it
accepts from these classes; the matrix module and companion_matrix.py make them from the matrix file; the child
reads them back from its spec.json (`Cell.from_dict`). They are frozen, and their tables and lists are stored as
read-only mappings and tuples, so a cell's settings never change once it is made: code that needs other settings
makes a new value (`dataclasses.replace`). A shared type at the bottom of the harness, beside cell.py: it imports
nothing of the harness's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any


def frozen(value: Any) -> Any:
    """A read-only copy: tables become read-only mappings and lists tuples, at every depth."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


def plain(value: Any) -> Any:
    """The JSON form of a frozen value: dicts and lists again."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def _table() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class _Spec:
    def __post_init__(self) -> None:
        for f in fields(self):  # frozen: the one place a field is set after __init__, to its read-only copy
            object.__setattr__(self, f.name, frozen(getattr(self, f.name)))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class ProfileSettings(_Spec):
    """What a model's [models.NAME.profile.P] table may set for profile P (the model's table may set it too)."""

    epochs: int | None = None           # None: the profile sets none for the model (its passes cells build with 1)
    train_samples: int | None = None    # None: the whole training split
    eval_samples: int | None = None     # None: the whole evaluation split
    val_samples: int | None = None      # None: eval_samples (the GRU's per-epoch validation BLEU)
    stop_at_target: bool = False        # end training at the first evaluation that reaches the target
    # Where set: the cells whose setting no time-to-target comparison reads (C1 reads each framework's baseline:
    # harness.claims.paper.BASELINE) train this many epochs, without stopping at the target; their throughput and
    # first epoch are what the claims read of them (harness.config.matrix applies it).
    throughput_epochs: int | None = None
    evals_per_epoch: int = 1
    hparams: Mapping[str, Any] = field(default_factory=_table)  # per model (lr, batch, hidden, ...): hp["lr"]


@dataclass(frozen=True, kw_only=True)
class ModelSpec(ProfileSettings):
    """A model and scaling cell's settings: its [models.NAME] table with the profile's settings merged in."""

    dataset: str
    metric: str
    target: float
    throughput_unit: str
    title: str | None = None


# The operators harness/scenarios/operator/ implements, with the keys of their shapes (a matrix sweep names every one).
SHAPE_KEYS = {"conv2d": ("batch", "in_channels", "out_channels", "size"),
              "linear": ("batch", "in_features", "out_features"),
              "batchnorm2d": ("batch", "channels", "size")}


@dataclass(frozen=True, kw_only=True)
class OperatorSpec(_Spec):
    """One configuration of an operator sweep ([operators.NAME]): a shape of the sweep at a dtype and direction."""

    title: str
    shape: Mapping[str, int]
    dtype: str
    direction: str


@dataclass(frozen=True, kw_only=True)
class InferenceSpec(_Spec):
    """An inference net ([inference.NAME]) at one batch size."""

    net: str
    batch: int
    title: str | None = None
    # harness.scenarios.operator.ops.blocked_time's options
    timing: Mapping[str, float] = field(default_factory=_table)


@dataclass(frozen=True, kw_only=True)
class PassesSpec(ModelSpec):
    """A matrix model's forward and gradient time ([passes]) at a fixed batch and number of CPU threads."""

    batch: int
    threads: int | str                  # a number, or "all"
    # harness.scenarios.operator.ops.blocked_time's options
    timing: Mapping[str, float] = field(default_factory=_table)


Spec = ModelSpec | OperatorSpec | InferenceSpec  # PassesSpec is a ModelSpec
SPEC_FOR_KIND: dict[str, type[_Spec]] = {"model": ModelSpec, "scaling": ModelSpec, "operator": OperatorSpec,
                                         "inference": InferenceSpec, "passes": PassesSpec}


def model_spec(table: Mapping[str, Any], profile_name: str) -> ModelSpec:
    """A model's [models.NAME] table with its [profile.P] settings merged in (hparams merged key by key)."""
    over = dict(table.get("profile", {}).get(profile_name, {}))
    spec = {k: v for k, v in table.items() if k != "profile"}
    spec["hparams"] = {**spec.get("hparams", {}), **over.pop("hparams", {})}
    return ModelSpec(**(spec | over))
