"""Is every model and dataset a matrix names whole? Checked before `harness run` and `harness list` do anything
(`require`), and by tests/test_contracts.py for every model folder and dataset file there is.

A model is its folder, `harness/models/<model>/`:

    __init__.py                 framework-neutral parts; MLPERF_KEYS (contracts.ModelPackage); pass_batch
                                (contracts.PassesModel) or NO_PASSES (contracts.NoPassesModel); micro_batches
                                (contracts.AccumulatingModel) or NO_ACCUMULATION (contracts.NoAccumulationModel)
    pytorch.py, mindspore.py    build(ctx, data) returning a workload class defined there (contracts.ModelModule,
                                ProbedWorkload); pass_loss(net) where the model has passes
    logcheck.yaml               the rules MLPerf's checker applies to its event logs (KEY records)
    reference_pytorch.py,       the framework's own way of training it (contracts.ReferenceModule), importing from the
    reference_mindspore.py      harness nothing but framework-neutral model packages

A dataset is its file, `harness/data/<name>.py` (contracts.DatasetModule). Framework files are read as source
(`ast`), so the check imports no framework and takes milliseconds; model packages and dataset modules are imported
(they import no framework). A problem is one line naming the file and the part it lacks.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

from harness import contracts
from harness.errors import HarnessError
from harness.paths import HARNESS

FRAMEWORKS = tuple(sorted(m.name for m in pkgutil.iter_modules([str(HARNESS / "frameworks")])))
DATA_HELPERS = frozenset({"archive", "fetch", "fixtures"})   # modules of harness/data that are not datasets
GUIDE = "docs/developers.md, Extending"


def members(protocol) -> dict[str, list[str] | None]:
    """{name: parameter names (without self)} of the protocol's methods; None for its data attributes."""
    out: dict[str, list[str] | None] = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object,) or cls.__name__ in ("Protocol", "Generic"):
            continue
        out.update({k: None for k in getattr(cls, "__annotations__", {})})
        out.update({k: list(inspect.signature(v).parameters)[1:] for k, v in vars(cls).items()
                    if inspect.isfunction(v) and not k.startswith("_")})
    return out


def problems(protocol, provided: dict[str, list[str] | None], what: str) -> list[str]:
    """What `provided` ({name: parameter names, or None for an attribute}) lacks or gets wrong."""
    out = []
    for name, params in members(protocol).items():
        if name not in provided:
            out.append(f"{what} lacks {name!r} ({protocol.__name__})")
        elif params is not None and provided[name] != params:
            out.append(f"{what}.{name} takes {provided[name]}, the contract says {params}")
    return out


def module_functions(mod) -> dict[str, list[str] | None]:
    """A module's functions (name -> parameters) and its upper-case constants (name -> None: an attribute)."""
    return {**{k: None for k in vars(mod) if k.isupper() and not k.startswith("_")},
            **{k: list(inspect.signature(v).parameters) for k, v in vars(mod).items() if inspect.isfunction(v)}}


def required_functions(mod) -> dict[str, list[str] | None]:
    """Like module_functions, without the parameters that have defaults (a plug-in may take more)."""
    return {k: [p.name for p in inspect.signature(v).parameters.values() if p.default is p.empty]
            for k, v in vars(mod).items() if inspect.isfunction(v)}


def source_functions(path: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str] | None]]]:
    """Top-level functions and, per class, its methods and `self.x = ...` attributes, read from source; a class
    also gets what its bases give it when they are classes of the harness (harness/models/_pytorch.py's
    ImageProbes, say), read from their own source the same way."""
    tree = ast.parse(path.read_text(), str(path))
    funcs = {n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)}
    imported = {a.asname or a.name: n.module for n in tree.body if isinstance(n, ast.ImportFrom)
                and (n.module or "").startswith("harness.") for a in n.names}
    classes: dict[str, dict[str, list[str] | None]] = {}
    for c in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        got: dict[str, list[str] | None] = {}
        for base in (b.id for b in c.bases if isinstance(b, ast.Name)):
            if base in classes:
                got |= classes[base]
            elif base in imported:
                got |= source_functions(HARNESS.parent / (imported[base].replace(".", "/") + ".py"))[1][base]
        for n in c.body:
            if isinstance(n, ast.FunctionDef):
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in n.decorator_list)
                got[n.name] = [a.arg for a in n.args.args][0 if static else 1:]
        for node in ast.walk(c):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        got.setdefault(e.attr, None)
        classes[c.name] = got
    return funcs, classes


def returned_class(path: Path, function: str = "build") -> str | None:
    """The class a top-level function returns an instance of (its first `return Name(...)`), or None."""
    tree = ast.parse(path.read_text(), str(path))
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    calls = [n.value.func.id for n in ast.walk(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)
             and isinstance(n.value.func, ast.Name)] if fn else []
    return calls[0] if calls else None


def harness_imports(path: Path) -> list[str]:
    """Every harness module a file imports (at any depth of its source)."""
    out = []
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "").split(".")[0] == "harness":
            out.append(n.module)
        elif isinstance(n, ast.Import):
            out += [a.name for a in n.names if a.name.split(".")[0] == "harness"]
    return out


def models() -> list[str]:
    """Every model folder (a package under harness/models/)."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HARNESS / "models")]) if m.ispkg)


def datasets() -> list[str]:
    """Every dataset file of harness/data/."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HARNESS / "data")]) if m.name not in DATA_HELPERS)


def _rel(path: Path) -> str:
    return str(path.relative_to(HARNESS.parent))


def model_problems(model: str) -> list[str]:
    """What the model's folder lacks, one line each (empty when it is whole)."""
    folder = HARNESS / "models" / model
    init = folder / "__init__.py"
    if not init.is_file():
        return [f"{_rel(init)} is missing: a model is a folder, harness/models/{model}/, its framework-neutral parts "
                "in __init__.py"]
    try:
        package = importlib.import_module(f"harness.models.{model}")
    except Exception as e:   # noqa: BLE001 - any error importing it is the model's problem, said in one line
        return [f"{_rel(init)} does not import: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
    out = [f"{_rel(init)}: {p}" for p in _package_problems(package)]
    timed = isinstance(package, contracts.PassesModel)
    for framework in FRAMEWORKS:
        out += _model_file_problems(folder / f"{framework}.py", timed)
        out += _reference_problems(folder / f"reference_{framework}.py")
    out += _logcheck_problems(folder / "logcheck.yaml")
    return out


def _package_problems(package) -> list[str]:
    out = []
    keys = vars(package).get("MLPERF_KEYS")
    if not isinstance(keys, dict):
        out.append("lacks MLPERF_KEYS, the event log's keys that say how the model trains (contracts.ModelPackage), "
                   "e.g. {'opt_name': 'adam', 'opt_learning_rate_decay_schedule': 'constant'}")
    else:
        from harness.results.eventlog import VOCABULARY

        out += [f"MLPERF_KEYS lacks {k!r} (contracts.ModelPackage)" for k in ("opt_name",
                "opt_learning_rate_decay_schedule") if k not in keys]
        out += [f"MLPERF_KEYS names {k!r}, not a key of MLPerf's event log (harness.results.eventlog.VOCABULARY)"
                for k in keys if k not in VOCABULARY]
    out += _either(package, contracts.PassesModel, contracts.NoPassesModel, "pass_batch", "NO_PASSES",
                   "why it has no passes")
    out += _either(package, contracts.AccumulatingModel, contracts.NoAccumulationModel, "micro_batches",
                   "NO_ACCUMULATION", "why it does not accumulate gradients")
    return out


def _either(package, does, does_not, function: str, reason: str, why: str) -> list[str]:
    """A model declares one of two Protocols: a function (`does`), or a reason it has none (`does_not`)."""
    yes, no = isinstance(package, does), isinstance(package, does_not)
    if yes == no:
        return [f"declares neither {function} (contracts.{does.__name__}) nor {reason}, {why} "
                f"(contracts.{does_not.__name__})" if not yes else f"declares both {function} and {reason}"]
    if yes:
        return problems(does, module_functions(package), "it")
    if not (isinstance(getattr(package, reason), str) and getattr(package, reason)):
        return [f"{reason} must say {why}"]
    return []


def _model_file_problems(path: Path, timed: bool) -> list[str]:
    if not path.is_file():
        return [f"{_rel(path)} is missing: each framework's build(ctx, data) of the model (contracts.ModelModule)"]
    funcs, classes = source_functions(path)
    out = problems(contracts.ModelModule, funcs, _rel(path))
    if "build" in funcs:
        cls = returned_class(path)
        if cls not in classes:
            out.append(f"{_rel(path)}: build() returns no instance of a class defined there (the workload)")
        else:
            out += problems(contracts.ProbedWorkload, classes[cls], f"{_rel(path)}: {cls}")
            if "train_part" in classes[cls]:   # optional; then it keeps its declared form
                out += problems(contracts.PartialEpochWorkload, classes[cls], f"{_rel(path)}: {cls}")
    if timed:
        out += problems(contracts.PassesModelModule, funcs, _rel(path))
    elif "pass_loss" in funcs:
        out.append(f"{_rel(path)}: a pass_loss for a model that declares NO_PASSES")
    return out


def _reference_problems(path: Path) -> list[str]:
    if not path.is_file():
        return [f"{_rel(path)} is missing: the model as the framework's own documentation trains it "
                "(contracts.ReferenceModule), which benchmarks/reference_gap.py times the cell against"]
    funcs, classes = source_functions(path)
    out = problems(contracts.ReferenceModule, funcs, _rel(path))
    if "build" in funcs:
        cls = returned_class(path)
        if cls in classes:
            out += problems(contracts.ReferenceLoop, classes[cls], f"{_rel(path)}: {cls}")
        else:
            out.append(f"{_rel(path)}: build() returns no instance of a class defined there (the loop)")
    shared = set(models())
    recipe = f"harness.models._reference_{path.stem.removeprefix('reference_')}"   # the references' own helpers
    out += [f"{_rel(path)} imports {name}: a reference loop imports nothing from the harness but framework-neutral "
            f"model packages (harness.models.<model>) and {recipe}" for name in harness_imports(path)
            if name != recipe
            and not (name.startswith("harness.models.") and name.split(".")[2] in shared and name.count(".") == 2)]
    return out


def _logcheck_problems(path: Path) -> list[str]:
    if not path.is_file():
        return [f"{_rel(path)} is missing: the rules MLPerf's checker applies to the model's event logs "
                "(KEY records, as harness/models/gcn/logcheck.yaml)"]
    import yaml

    try:
        records = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        return [f"{_rel(path)} is not YAML: {str(e).splitlines()[0]}"]
    if not (isinstance(records, list) and records and all(
            isinstance(r, dict) and (isinstance(r.get("KEY"), dict) and r["KEY"].get("NAME") or "BEGIN" in r)
            for r in records)):
        return [f"{_rel(path)} holds no list of checker records (- KEY: with a NAME, as MLPerf's rules files)"]
    return []


def dataset_problems(name: str) -> list[str]:
    """What the dataset's file lacks, one line each (empty when it is whole)."""
    path = HARNESS / "data" / f"{name}.py"
    if not path.is_file():
        return [f"{_rel(path)} is missing: a dataset is one file (contracts.DatasetModule)"]
    try:
        mod = importlib.import_module(f"harness.data.{name}")
    except Exception as e:   # noqa: BLE001 - any error importing it is the dataset's problem, said in one line
        return [f"{_rel(path)} does not import: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
    provided: dict[str, Any] = {**required_functions(mod), **{k: None for k in ("FOLDER", "FILES", "URLS",
                                                                                   "EVAL_LIMITED") if k in vars(mod)}}
    # prepare is optional; a dataset that has it keeps SelfPreparingDataset's form (DatasetModule's and prepare's)
    protocol = contracts.SelfPreparingDataset if "prepare" in provided else contracts.DatasetModule
    return problems(protocol, provided, _rel(path))


def require(model_tables: dict[str, dict]) -> None:
    """Every model a matrix names (its `[models.NAME]` tables) and each one's dataset is whole, or HarnessError: one
    line naming the first file and part missing (and how many more there are)."""
    found: list[str] = []
    for model, table in sorted(model_tables.items()):
        found += model_problems(model)
        if isinstance(table, dict) and isinstance(table.get("dataset"), str):   # said with the line that names it
            named = f' ([models.{model}] dataset = "{table["dataset"]}")'
            found += [p + named for p in dataset_problems(table["dataset"]) if p + named not in found]
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise HarnessError(f"{found[0]}{more}; see {GUIDE}")
