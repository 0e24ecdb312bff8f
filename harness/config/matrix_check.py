"""Validate a whole matrix file before any cell runs: every table and key known, every value of the right type,
every axis value one that exists. A problem is a HarnessError of one line naming the key, what it holds and what
is allowed, so a typo (`[[exlude]]`, `target = "seventy"`, `framework = "pytroch"`) never silently selects
nothing or fails later inside each cell."""

from __future__ import annotations

import importlib.util
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from harness.config.cell import PLATFORMS
from harness.config.spec import SHAPE_KEYS, InferenceSpec, ModelSpec, OperatorSpec, PassesSpec, ProfileSettings
from harness.errors import HarnessError


def spec_keys(cls: type, *names: str) -> dict[str, type | tuple[type, ...]]:
    """The matrix-file keys of a harness.config.spec class's fields (`names`, or all), each with the TOML value types
    its declared type accepts: an integer also for a float, a table for a mapping, the set value's for an optional
    one."""
    hints = typing.get_type_hints(cls)
    out: dict[str, type | tuple[type, ...]] = {}
    for f in fields(cls):
        if names and f.name not in names:
            continue
        hint = hints[f.name]
        wants: list[type] = []
        for t in typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,):
            if t is float:
                wants += [int, float]  # TOML writes 1 for 1.0
            elif typing.get_origin(t) is Mapping:
                wants.append(dict)
            elif t is not type(None):
                wants.append(t)
        out[f.name] = wants[0] if len(wants) == 1 else tuple(wants)
    return out


SCHEMA = 1   # the newest matrix schema this harness reads
TOP_KEYS = {"schema", "defaults", "axes", "models", "operators", "inference", "passes", "exclude", "skip", "profiles"}
DEFAULT_KEYS = {"seed": int, "timeout_s": (int, float)}
AXIS_KEYS = {"framework": str, "mode": str, "amp": str, "devices": int}
# The tables that make cells: the fields of their harness.config.spec class, and the keys that are the file's own (a
# model's per-profile settings, an operator's sweeps).
MODEL_KEYS = {**spec_keys(ModelSpec), "profile": dict}
MODEL_REQUIRED = tuple(f.name for f in fields(ModelSpec) if f.default is MISSING and f.default_factory is MISSING)
MODEL_PROFILE_KEYS = spec_keys(ProfileSettings)
OPERATOR_KEYS = {**spec_keys(OperatorSpec, "title"), "sweep": dict, "quick": dict}
# The companion studies' tables (companion_matrix.py): settings of their cells' spec, the lists their cells are made
# from, and per-profile tables that narrow the profile's axes or set those lists and settings for one profile.
NARROWING = {"frameworks": list, "modes": list, "amp": list}
INFERENCE_KEYS = {**spec_keys(InferenceSpec, "title", "timing"), "batches": list, "profile": dict}
INFERENCE_PROFILE_KEYS = {**NARROWING, "batches": list}
PASSES_KEYS = {**spec_keys(PassesSpec, "batch", "timing"), "threads": list, "profile": dict}
PASSES_PROFILE_KEYS = {**NARROWING, **spec_keys(PassesSpec, "batch", "timing"), "threads": list}
PROFILE_KEYS = {"description": str, "models": list, "operators": list, "frameworks": list, "modes": list,
                "amp": list, "devices": list, "dtypes": list, "directions": list, "repeats": int,
                "claim_repeats": int, "max_repeats": int, "operator_max_repeats": int,
                "operator_budget_s": (int, float), "timeout_s": (int, float),
                "inference": list, "passes": list,  # these two: companion_matrix.py
                "order": str,   # "claims-first": harness.config.matrix.ORDERS
                "accelerator_hours": (int, float)}   # the profile's goal on a GPU or NPU host (harness.launch.booking)
RULE_KEYS = {"model", "op", "framework", "mode", "amp", "devices", "platform", "dtype", "direction", "profile"}
DTYPES = ("fp32", "fp16", "bf16")
DIRECTIONS = ("fwd", "fwd+bwd")
TYPE_NAMES = {bool: "true or false", str: "a string", int: "an integer", float: "a number", dict: "a table",
              list: "a list"}


class _Checker:
    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data

    def fail(self, where: str, what: str) -> None:
        raise HarnessError(f"matrix file {self.path}: {where} {what}")

    def type(self, where: str, value: Any, want) -> None:
        wants = want if isinstance(want, tuple) else (want,)
        if (isinstance(value, bool) and bool not in wants) or not isinstance(value, wants):
            names = " or ".join(dict.fromkeys("a number" if w in (int, float) and len(wants) > 1 else TYPE_NAMES[w]
                                              for w in wants))
            self.fail(where, f"is {value!r} ({_kind(value)}); it must be {names}")

    def keys(self, where: str, table: Any, allowed: dict | set, what: str = "key") -> None:
        self.type(where, table, dict)
        bad = sorted(set(table) - set(allowed))
        if bad:
            self.fail(where, f"has unknown {what}(s) {', '.join(map(repr, bad))}; "
                             f"allowed: {', '.join(sorted(allowed))}")
        if isinstance(allowed, dict):
            for k, want in allowed.items():
                if k in table:
                    self.type(f"{where} {k}", table[k], want)

    def one_of(self, where: str, value: Any, allowed, hint: str) -> None:
        if value not in allowed:
            self.fail(where, f"has {value!r}, which is not one of {list(allowed)}; {hint}")

    def check(self) -> None:
        d = self.data
        bad = sorted(set(d) - TOP_KEYS)
        if bad:
            self.fail("top level", f"has unknown table(s) or key(s) {', '.join(map(repr, bad))} (a typo?); "
                                   f"allowed: {', '.join(sorted(TOP_KEYS))}")
        schema = d.get("schema", SCHEMA)
        self.type("schema", schema, int)
        if schema > SCHEMA:
            self.fail("schema", f"is {schema}, newer than this harness reads ({SCHEMA}); update the harness "
                                f"(git pull) or use a matrix file of schema {SCHEMA}")
        self.keys("[defaults]", d.get("defaults", {}), DEFAULT_KEYS)
        axes = d.get("axes", {})
        self.keys("[axes]", axes, {k: list for k in AXIS_KEYS})
        for k, want in AXIS_KEYS.items():
            for v in axes.get(k, []):
                self.type(f"[axes] {k}", v, want)
        for fw in axes.get("framework", []):
            if importlib.util.find_spec(f"harness.frameworks.{fw}") is None:
                self.fail("[axes] framework", f"has '{fw}', which has no back-end harness/frameworks/{fw}.py; "
                                              f"add one or remove '{fw}'")
        self.type("[models]", d.get("models", {}), dict)
        for name, m in d.get("models", {}).items():
            self.model(name, m)
        self.type("[operators]", d.get("operators", {}), dict)
        for name, o in d.get("operators", {}).items():
            self.operator(name, o)
        self.type("[inference]", d.get("inference", {}), dict)
        for name, t in d.get("inference", {}).items():
            self.companion(f"[inference.{name}]", t, INFERENCE_KEYS, INFERENCE_PROFILE_KEYS)
            if "batches" not in t:
                self.fail(f"[inference.{name}]", "has no 'batches'; add batches = [...]")
        self.companion("[passes]", d.get("passes", {}), PASSES_KEYS, PASSES_PROFILE_KEYS)
        self.type("[profiles]", d.get("profiles", {}), dict)
        for name, p in d.get("profiles", {}).items():
            self.profile(name, p, axes)
        for section in ("exclude", "skip"):
            self.type(f"[[{section}]]", d.get(section, []), list)
            for i, rule in enumerate(d.get(section, []), 1):
                self.rule(f"[[{section}]] rule {i}", rule, axes, section)

    def model(self, name: str, m: Any) -> None:
        where = f"[models.{name}]"
        self.keys(where, m, MODEL_KEYS)
        for k in MODEL_REQUIRED:
            if k not in m:
                self.fail(where, f"has no '{k}'; add {k} = ...")
        # Whether its folder and its dataset's file are whole is harness.conformance's check (harness run, list).
        for prof, over in m.get("profile", {}).items():
            self.one_of(f"{where} profile", prof, list(self.data.get("profiles", {})), "name a [profiles.*] table")
            self.keys(f"{where} profile.{prof}", over, MODEL_PROFILE_KEYS)
            self.type(f"{where} profile.{prof} hparams", over.get("hparams", {}), dict)
        for table, label in [(m, where)] + [(o, f"{where} profile.{p}") for p, o in m.get("profile", {}).items()]:
            for key in ("epochs", "evals_per_epoch"):
                if table.get(key, 1) < 1:
                    self.fail(f"{label} {key}", f"is {table[key]}; it must be 1 or more")

    def companion(self, where: str, table: Any, allowed: dict, profile_allowed: dict) -> None:
        self.keys(where, table, allowed)
        for prof, over in table.get("profile", {}).items():
            self.one_of(f"{where} profile", prof, list(self.data.get("profiles", {})), "name a [profiles.*] table")
            self.keys(f"{where} profile.{prof}", over, profile_allowed)

    def operator(self, name: str, o: Any) -> None:
        where = f"[operators.{name}]"
        self.keys(where, o, OPERATOR_KEYS)
        self.one_of(where[1:-1], name, SHAPE_KEYS, "harness/scenarios/operator/ implements these")
        if "sweep" not in o:
            self.fail(where, "has no 'sweep'; add sweep = { batch = [...], ... }")
        for key in ("sweep", "quick"):
            if key in o:
                self.keys(f"{where} {key}", o[key], {k: list for k in SHAPE_KEYS[name]})
                missing = [k for k in SHAPE_KEYS[name] if k not in o[key]]
                if missing:
                    self.fail(f"{where} {key}", f"lacks {', '.join(missing)}; "
                                                f"{name} needs {', '.join(SHAPE_KEYS[name])}")
                for k, values in o[key].items():
                    for v in values:
                        self.type(f"{where} {key}.{k}", v, int)

    def profile(self, name: str, p: Any, axes: dict) -> None:
        where = f"[profiles.{name}]"
        self.keys(where, p, PROFILE_KEYS)
        choices = {"models": list(self.data.get("models", {})), "operators": list(self.data.get("operators", {})),
                   "inference": list(self.data.get("inference", {})), "passes": list(self.data.get("models", {})),
                   "frameworks": axes.get("framework", []), "modes": axes.get("mode", []),
                   "amp": axes.get("amp", []), "devices": axes.get("devices", []), "dtypes": DTYPES,
                   "directions": DIRECTIONS}
        source = {"models": "[models.*] tables", "operators": "[operators.*] tables",
                  "inference": "[inference.*] tables",
                  "passes": "[models.*] tables", "frameworks": "[axes] framework",
                  "modes": "[axes] mode", "amp": "[axes] amp", "devices": "[axes] devices",
                  "dtypes": "the dtypes the operators support", "directions": "the operator directions"}
        for key, allowed in choices.items():
            for v in p.get(key, []):
                self.one_of(f"{where} {key}", v, allowed, f"the values come from {source[key]}")
        if p.get("models") and not all(p.get(k) for k in ("frameworks", "modes", "amp", "devices")):
            self.fail(where, "names models but not all of frameworks, modes, amp and devices; add the missing lists")
        if "order" in p:
            self.one_of(f"{where} order", p["order"], ["matrix", "claims-first"], "the orders harness.config.matrix knows")  # noqa: E501
        if p.get("repeats", 1) < 1 or p.get("claim_repeats", 1) < 1 or p.get("timeout_s", 1) <= 0:
            self.fail(where, "needs repeats >= 1, claim_repeats >= 1 and timeout_s > 0")
        least, cap = p.get("claim_repeats", 1), p.get("max_repeats", p.get("claim_repeats", 1))
        if isinstance(least, int) and isinstance(cap, int) and cap < least:
            self.fail(where, "needs max_repeats >= claim_repeats (the cap of the sequential repeats)")

    def rule(self, where: str, rule: Any, axes: dict, section: str) -> None:
        allowed = RULE_KEYS - ({"platform"} if section == "exclude" else set())
        self.keys(where, rule, allowed | {"why"})
        if "why" not in rule:
            self.fail(where, "has no 'why'; say why the rule exists: why = \"...\"")
        self.type(f"{where} why", rule["why"], str)
        values = {"framework": axes.get("framework", []), "mode": axes.get("mode", []), "amp": axes.get("amp", []),
                  "devices": axes.get("devices", []), "platform": PLATFORMS,
                  # a rule's `model` also names the companion studies' inference nets ([inference.NAME])
                  "model": list(self.data.get("models", {})) + list(self.data.get("inference", {})),
                  "op": list(self.data.get("operators", {})),
                  "profile": list(self.data.get("profiles", {})), "dtype": DTYPES, "direction": DIRECTIONS}
        for key, want in rule.items():
            if key == "why":
                continue
            for v in want if isinstance(want, list) else [want]:
                self.one_of(f"{where} {key}", v, values[key], "a rule with a value that does not exist matches nothing")


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number", dict: "a table",
            list: "a list"}.get(type(value), type(value).__name__)


def validate(path: Path, data: dict[str, Any]) -> None:
    _Checker(path, data).check()
