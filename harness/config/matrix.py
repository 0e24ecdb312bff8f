"""Load the matrix file and expand a profile into cells with stable ids.

The expansion is a cartesian product of the profile's axis values, pruned by the file's
[[exclude]] rules. Each cell runs the profile's `repeats`; the cells a claim compares (C1-C4's model cells,
harness.config.study.compared_settings; C5's scaling cells, scaled_settings; O1-O3's operator cells) at least its
`claim_repeats`, so that their ratios have intervals; `repeats=` (`harness run --repeats N`) sets every cell's. [[skip]]
rules depend on the platform and are applied by harness.host.plan.Host, which the runner asks before every cell: it
records the cell as `skipped` with the rule's reason instead of running it.
"""

from __future__ import annotations

import fnmatch
import itertools
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.config import cellid, companion_matrix, matrix_check
from harness.config.cell import Cell
from harness.config.spec import ModelSpec, OperatorSpec, model_spec
from harness.config.study import BASELINE, PAPER_MODELS, compared_settings, scaled_settings
from harness.errors import HarnessError

DEFAULT_MATRIX = Path(__file__).with_name("matrix.toml")


@dataclass
class Matrix:
    path: Path
    data: dict[str, Any]

    @property
    def profiles(self) -> list[str]:
        return sorted(self.data.get("profiles", {}))

    def profile(self, name: str) -> dict[str, Any]:
        profiles = self.data.get("profiles", {})
        if name not in profiles:
            raise HarnessError(f"unknown profile '{name}' in {self.path}; choose one of: {', '.join(self.profiles)}")
        return profiles[name]

    def skip_rule(self, values: dict[str, Any]) -> str | None:
        """The `why` of the first [[skip]] rule that matches these values (a cell's axes, a platform and a profile),
        or None. Which values a cell meets the rules with is harness.host.plan.Host's to say."""
        return next((rule["why"] for rule in self.data.get("skip", []) if _matches(rule, values)), None)

    def expand(self, profile_name: str, only: str | None = None, repeats: int | None = None,
               nodes: int = 1) -> list[Cell]:
        """The profile's cells (those matching `only`), each with its number of repeats (`repeats`: every cell's).

        `nodes` > 1 (a multi-node run, HARNESS_NNODES): the profile's data-parallel cells over that many hosts, one for
        each of the profile's device counts as the devices per node (ResNet50 at [1, 2] on 2 nodes: 2x1dev and 2x2dev),
        and nothing else: the 1-device cells their efficiency is measured against, the operators and the companion
        studies run on one host, in a run of their own. A setting that an [[exclude]] rule leaves out of data
        parallelism on one host is left out across nodes too; the [[skip]] rules see the devices of one node."""
        if nodes > 1:
            return self._select(self._multi_node(profile_name, repeats, nodes), only, profile_name)
        prof = self.profile(profile_name)
        defaults = self.data.get("defaults", {})
        timeout = float(prof.get("timeout_s", defaults.get("timeout_s", 1800)))
        seed = int(defaults.get("seed", 0))
        base = int(prof.get("repeats", 1))
        cells: list[Cell] = []
        for model in prof.get("models", []):
            mspec = self.data["models"][model]
            spec = model_spec(mspec, profile_name)
            product = itertools.product(prof["frameworks"], prof["modes"], prof["amp"], prof["devices"])
            for fw, mode, amp, dev in product:
                axes = {"model": model, "framework": fw, "mode": mode, "amp": amp, "devices": dev,
                        "profile": profile_name}
                if self.excluded(axes):
                    continue
                kind = "model" if dev == 1 else "scaling"
                cells.append(Cell(id=cellid.model_id(model, fw, mode, amp, dev), kind=kind, model=model,
                                  framework=fw, mode=mode, amp=amp, devices=dev, repeats=base,
                                  timeout_s=timeout, seed=seed, spec=for_setting(spec, fw, mode, amp, dev)))
        for op in prof.get("operators", []):
            cells.extend(self._operator_cells(op, profile_name, prof, timeout, seed, base))
        cells.extend(companion_matrix.expand(self, profile_name, prof, timeout, seed, base))  # inference, passes
        cells = [replace(c, repeats=_repeats(c, prof, repeats)) for c in cells]
        if prof.get("order") == "claims-first":
            cells = claims_first(cells, prof)
        return self._select(cells, only, profile_name)

    def _multi_node(self, profile_name: str, repeats: int | None, nodes: int) -> list[Cell]:
        prof = self.profile(profile_name)
        cells = []
        base = int(prof.get("repeats", 1))
        for c in self.expand(profile_name):
            if c.kind != "model":   # every model cell's setting, at each device count per node
                continue
            # A setting left out of data parallelism on one host at any device count is left out across nodes too.
            if any(self.excluded({**c.axes(), "devices": d, "profile": profile_name})
                   for d in prof["devices"] if d > 1):
                continue
            for per_node in prof["devices"]:
                n = nodes * per_node
                cells.append(replace(c, id=cellid.model_id(c.model or "", c.framework, c.mode, c.amp, n, nodes),
                                     kind="scaling", devices=n, nodes=nodes, repeats=base))
        return [replace(c, repeats=_repeats(c, prof, repeats)) for c in cells]

    def _select(self, cells: list[Cell], only: str | None, profile_name: str) -> list[Cell]:
        if only is not None:
            # Several globs, comma-separated: a cell is kept when any of them matches its id.
            globs = [g.strip() for g in only.split(",") if g.strip()]
            cells = [c for c in cells if any(fnmatch.fnmatchcase(c.id, g) for g in globs)]
            if not cells:
                raise HarnessError(f"--only '{only}' matches no cell of profile '{profile_name}'; "
                                   f"see `python -m harness list --profile {profile_name}`")
        return cells

    def _operator_cells(self, op, profile_name, prof, timeout, seed, repeats) -> list[Cell]:
        ospec = self.data["operators"][op]
        sweep = ospec["quick"] if profile_name == "quick" and "quick" in ospec else ospec["sweep"]
        names = list(sweep)
        out = []
        for fw, mode in itertools.product(prof["frameworks"], prof["modes"]):
            for dtype, direction in itertools.product(prof.get("dtypes", ["fp32"]), prof.get("directions", ["fwd"])):
                axes = {"op": op, "framework": fw, "mode": mode, "amp": "off", "devices": 1,
                        "dtype": dtype, "direction": direction, "profile": profile_name}
                if self.excluded(axes):
                    continue
                for values in itertools.product(*(sweep[n] for n in names)):
                    shape = dict(zip(names, values, strict=False))
                    out.append(Cell(id=cellid.operator_id(op, fw, mode, dtype, direction, shape), kind="operator",
                                    op=op, framework=fw, mode=mode, amp="off", devices=1, repeats=repeats,
                                    timeout_s=timeout, seed=seed,
                                    spec=OperatorSpec(title=ospec.get("title", op), shape=shape, dtype=dtype,
                                                      direction=direction)))
        return out

    def max_repeats(self, profile_name: str, repeats: int | None = None, cap: int | None = None) -> int:
        """The cap of a compared cell's repeats (harness.launch.sequential): `cap` (run --max-repeats) where given,
        else the profile's `max_repeats` (default: its `claim_repeats`, no sequential repeats); never below the minimum
        that `repeats` (run --repeats) or `claim_repeats` sets."""
        prof = self.profile(profile_name)
        least = repeats if repeats is not None else int(prof.get("claim_repeats", prof.get("repeats", 1)))
        if cap is not None and cap < 1:
            raise HarnessError(f"--max-repeats {cap}: a cell needs at least 1 repeat")
        want = cap if cap is not None else int(prof.get("max_repeats", least))
        return max(want, least)

    def operator_max_repeats(self, profile_name: str, cap: int, given: bool = False) -> int:
        """The cap of an operator configuration's repeats while its ratio's interval is wider than
        harness.launch.sequential.OPERATOR_PRECISION: the profile's `operator_max_repeats`, never below `cap` (the
        claims' cap, max_repeats). Operator processes cost seconds; the ratios they give vary between processes
        (harness.launch.sequential). `given`: the run's --max-repeats set `cap`, and it caps the operators too."""
        return cap if given else max(cap, int(self.profile(profile_name).get("operator_max_repeats", cap)))

    def operator_budget_s(self, profile_name: str) -> float | None:
        """The operator cells' own seconds (harness.scenarios.operator.turns.own_seconds, summed over the run) past
        which Figure 5's precision rule asks for no more groups: the profile's `operator_budget_s`, None where it sets
        none."""
        budget = self.profile(profile_name).get("operator_budget_s")
        return None if budget is None else float(budget)

    def excluded(self, axes: dict[str, Any]) -> bool:
        """Whether an [[exclude]] rule prunes a cell with these axis values (also called by companion_matrix)."""
        return any(_matches(rule, axes) for rule in self.data.get("exclude", []))


def _repeats(cell: Cell, prof: dict[str, Any], override: int | None) -> int:
    """A cell's repeats: `override` (run --repeats) where given; else the profile's `repeats`, and for a cell a
    claim compares (C1-C4's model cells of the paper's models, C5's scaling cells, O1-O3's operator cells) at least
    the profile's `claim_repeats`. The companion studies' models (GoogLeNet, LSTM, BERT) serve S1-S4: the claims
    read them too, but no verdict rests on them, so they keep the profile's repeats."""
    if override is not None:
        if override < 1:
            raise HarnessError(f"--repeats {override}: a cell needs at least 1 repeat")
        return override
    return max(cell.repeats, int(prof.get("claim_repeats", 1))) if compared(cell) else cell.repeats


def compared(cell: Cell) -> bool:
    """Whether a claim compares the cell: C1-C4's model cells of the paper's models, C5's scaling cells, O1-O3's
    operator cells."""
    return (cell.kind == "model" and cell.model in PAPER_MODELS
            and (cell.framework, cell.mode, cell.amp) in compared_settings()
            or cell.kind == "scaling" and (cell.framework, cell.mode) in scaled_settings()
            # O1-O3: an operator's processes differ (harness.scenarios.operator.ops.SWEEP_TIMING)
            or cell.kind == "operator")


def for_setting(spec: ModelSpec, framework: str, mode: str, amp: str, devices: int) -> ModelSpec:
    """A model cell's settings: the profile's, except that where the profile sets `throughput_epochs` a cell no
    time-to-target comparison reads (not a framework's single-device baseline, harness.config.study.BASELINE) trains
    that many epochs without stopping at the target."""
    if spec.throughput_epochs is None or (devices == 1 and BASELINE.get(framework) == (mode, amp)):
        return spec
    return replace(spec, epochs=spec.throughput_epochs, stop_at_target=False)


def claims_first(cells: list[Cell], prof: dict[str, Any]) -> list[Cell]:
    """A profile's cells with the model cells a claim compares (C1-C4) first, then the other model cells, the scaling
    cells (C5), the operators (O1-O3) and the rest, each group in the matrix's order: a run cut short has decided the
    paper's model claims first and renders their tables."""
    rank = {"model": 1, "scaling": 2, "operator": 3}

    def key(ic: tuple[int, Cell]) -> tuple[int, int]:
        i, c = ic
        return (0 if c.kind == "model" and compared(c) else rank.get(c.kind, 4), i)

    return [c for _, c in sorted(enumerate(cells), key=key)]


def _matches(rule: dict[str, Any], values: dict[str, Any]) -> bool:
    for key, want in rule.items():
        if key == "why":
            continue
        allowed = want if isinstance(want, list) else [want]
        if values.get(key) not in allowed:
            return False
    return True


def load(path: str | Path | None = None) -> Matrix:
    path = Path(path) if path else DEFAULT_MATRIX
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise HarnessError(f"matrix file {path} does not exist; pass an existing file to --matrix") from None
    except tomllib.TOMLDecodeError as e:
        raise HarnessError(f"matrix file {path} is not valid TOML ({e}); fix that line") from None
    matrix_check.validate(path, data)
    return Matrix(path, data)


def shard(cells: list[Cell], spec: str | None) -> list[Cell]:
    """The K-th of N slices ("K/N", 1-based) of a cell list: every N-th cell from the K-th, so each slice gets a
    share of every model and framework, and the same matrix and options always give the same slices."""
    if spec is None:
        return cells
    k, sep, n = spec.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise HarnessError(f"--shard '{spec}' is not K/N with 1 <= K <= N (e.g. --shard 2/8)")
    return cells[int(k) - 1::int(n)]


def schedule(cells: list[Cell]) -> list[tuple[Cell, int]]:
    """The order the runner runs (cell, repeat) in. A cell's repeats follow one another, except the operator cells.
    An operator configuration's cells (one per framework and mode, which Figure 5 and O1-O3 divide) take turns, one
    repeat of each, the order rotating every repeat, so that whatever the host does over the minutes of a sweep falls
    on both sides of a ratio alike, and no cell always runs right after the same other (measured: the same PyTorch
    Linear ran 32-34 us an iteration in the processes of one sweep and 46-52 us in those of another). And the
    configurations take turns too: every configuration's first group, then every configuration's second, so that a
    configuration's groups are spread over the sweep rather than run back to back (two groups run seconds apart
    shared the host's state of those seconds, and their agreement said less about the next run than their interval
    claimed; docs/methodology/operators.md, item 16). The operator cells run where the first of them stands."""
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        if c.kind == "operator":
            groups.setdefault(cellid.configuration(c.id), []).append(c)
    out: list[tuple[Cell, int]] = []
    placed = False
    for c in cells:
        if c.kind != "operator":
            out.extend((c, r) for r in range(c.repeats))
            continue
        if placed:
            continue
        placed = True
        for r in range(max(g.repeats for g in cells if g.kind == "operator")):
            for group in groups.values():
                turn = group[r % len(group):] + group[:r % len(group)]
                out.extend((g, r) for g in turn if r < g.repeats)
    return out


def one_per_model(cells: list[Cell]) -> list[Cell]:
    """One fp32 single-device model cell of every model, in the matrix's order of models, the framework taken in
    turn (PyTorch eager for the first model, MindSpore GRAPH for the second, ...): the image checks run these, so a
    model added to the matrix is run in both images without a list to edit."""
    turns = (("pytorch", "eager"), ("mindspore", "graph"))
    by_model: dict[str, list[Cell]] = {}
    for c in cells:
        if c.kind == "model" and c.amp == "off" and c.devices == 1:
            by_model.setdefault(c.model, []).append(c)
    out = []
    for i, candidates in enumerate(by_model.values()):
        wanted = turns[i % len(turns)]
        out.append(next((c for c in candidates if (c.framework, c.mode) == wanted), candidates[0]))
    return out
