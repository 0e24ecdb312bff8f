"""The companion studies' cells (S1-S4 in the report): `inference` and `passes` kinds, expanded from the matrix
file's [inference.NAME] and [passes] tables for a profile's `inference` and `passes` lists.

- inference: one cell per net x framework x mode x AMP level x batch size, `inference/NET/FW/MODE/amp-A/batchB`.
  The table's `profile.P` sub-table may narrow the profile's frameworks, modes, amp and the batches.
- passes: forward time and gradient (forward + backward) time per batch of a matrix model at a fixed batch, one cell
  per model x framework x mode x thread count, `passes/MODEL/FW/MODE/threadsT` (T: a number, or `all`).
 Both are pruned by the file's [[exclude]] rules, as the other kinds (the cell's net or model is the rule key
`model`, AMP `amp`; passes cells run with AMP off).
"""

from __future__ import annotations

import itertools
from typing import Any

from harness.config import cellid
from harness.config.cell import Cell
from harness.config.spec import InferenceSpec, PassesSpec, model_spec
from harness.errors import HarnessError

PROFILE_KEYS = {"inference", "passes"}


def _narrowed(table: dict[str, Any], profile_name: str, prof: dict[str, Any]) -> dict[str, Any]:
    """The profile's axis lists, narrowed by the table's [profile.P] settings (which must be subsets)."""
    over = table.get("profile", {}).get(profile_name, {})
    out = {k: prof.get(k, []) for k in ("frameworks", "modes", "amp")}
    for key in out:
        if key in over:
            out[key] = [v for v in out[key] if v in over[key]]
    out["rest"] = {k: v for k, v in over.items() if k not in out}
    return out


def expand(matrix, profile_name: str, prof: dict[str, Any], timeout: float, seed: int, repeats: int) -> list[Cell]:
    """The profile's inference and passes cells. `matrix` is the loaded `harness.config.matrix.Matrix` (its `data`,
    `path` and `excluded` are read); it calls this, so this module does not import it."""
    data = matrix.data
    cells: list[Cell] = []
    for name in prof.get("inference", []):
        table = data.get("inference", {}).get(name)
        if table is None:
            raise HarnessError(f"matrix file {matrix.path}: profile '{profile_name}' names inference net '{name}' "
                               f"with no [inference.{name}] table")
        axes = _narrowed(table, profile_name, prof)
        batches = axes["rest"].get("batches", table["batches"])
        net_settings = {k: v for k, v in table.items() if k not in ("profile", "batches")}  # title, timing
        for fw, mode, amp in itertools.product(axes["frameworks"], axes["modes"], axes["amp"]):
            rule_axes = {"model": name, "framework": fw, "mode": mode, "amp": amp, "devices": 1,
                         "profile": profile_name}
            if matrix.excluded(rule_axes):
                continue
            for b in batches:
                cells.append(Cell(id=cellid.inference_id(name, fw, mode, amp, b), kind="inference",
                                  model=name, framework=fw, mode=mode, amp=amp, devices=1, repeats=repeats,
                                  timeout_s=timeout, seed=seed, spec=InferenceSpec(net=name, batch=b, **net_settings)))
    if prof.get("passes"):
        table = data.get("passes", {})
        axes = _narrowed(table, profile_name, prof)
        threads = axes["rest"].get("threads", table.get("threads", ["all"]))
        batch = int(axes["rest"].get("batch", table.get("batch", 16)))
        for model in prof["passes"]:
            if model not in data.get("models", {}):
                raise HarnessError(f"matrix file {matrix.path}: profile '{profile_name}' passes names model "
                                   f"'{model}' with no [models.{model}] table")
            base = model_spec(data["models"][model], profile_name)
            # The model as the passes scenario builds it: an epoch count for its learning-rate schedule where the
            # profile sets none, and the fixed batch in place of the model's own (GCN, full-batch, has none).
            model_settings = base.to_dict() | {"epochs": 1 if base.epochs is None else base.epochs,
                                               "hparams": {**base.hparams, "batch": batch} if "batch" in base.hparams
                                               else base.hparams}
            for fw, mode in itertools.product(axes["frameworks"], axes["modes"]):
                rule_axes = {"model": model, "framework": fw, "mode": mode, "amp": "off", "devices": 1,
                             "profile": profile_name}
                if matrix.excluded(rule_axes):
                    continue
                for t in threads:
                    spec = PassesSpec(**model_settings, batch=batch, threads=t,
                                      timing=axes["rest"].get("timing", table.get("timing", {})))
                    cells.append(Cell(id=cellid.passes_id(model, fw, mode, t), kind="passes", model=model,
                                      framework=fw, mode=mode, amp="off", devices=1, repeats=repeats,
                                      timeout_s=timeout, seed=seed, spec=spec))
    return cells
