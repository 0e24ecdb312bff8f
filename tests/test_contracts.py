"""Conformance: every framework back-end, scenario, model package and model file, operator, passes and inference
file and dataset provides what harness/contracts.py declares, with the declared parameter names. Back-ends, scenarios,
model packages and datasets are imported (they import no framework at module level); model, operator, passes and
inference files are read as source (ast), so the check needs neither PyTorch nor MindSpore and a new model or framework
that lacks a piece fails here, naming it. No code probes with hasattr what a plug-in provides (what one may provide
beyond its contract is a Protocol of its own), and none that runs models asks for one by name."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import contracts, frameworks, matrix, scenarios
from harness import data as datasets
from harness.models import model_package
from harness.scenarios import SCENARIO_FOR_KIND

HARNESS = Path(__file__).resolve().parent.parent / "harness"
FRAMEWORKS = sorted(m.name for m in pkgutil.iter_modules(frameworks.__path__))
SCENARIOS = sorted(m.name for m in pkgutil.iter_modules(scenarios.__path__))
MODELS = sorted(m.name for m in pkgutil.iter_modules([str(HARNESS / "models")]) if m.ispkg)
DATA_HELPERS = {"archive", "fetch", "fixtures"}  # modules of harness/data that are not datasets
DATASETS = sorted(m.name for m in pkgutil.iter_modules(datasets.__path__) if m.name not in DATA_HELPERS)
# One file per framework in each of these folders, and the contract it keeps.
PER_FRAMEWORK = {"operators": contracts.OperatorModule, "passes": contracts.PassesModule,
                 "inference": contracts.InferenceModule}


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


def source_functions(path: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str] | None]]]:
    """Top-level functions and, per class, its methods and `self.x = ...` attributes, read from source; a class
    also gets what its bases give it when they are classes of the harness (harness/models/_pytorch.py's
    ImageProbes, say), read from their own source the same way."""
    tree = ast.parse(path.read_text())
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


def required_functions(mod) -> dict[str, list[str] | None]:
    """Like module_functions, without the parameters that have defaults (a plug-in may take more)."""
    return {k: [p.name for p in inspect.signature(v).parameters.values() if p.default is p.empty]
            for k, v in vars(mod).items() if inspect.isfunction(v)}


def test_every_kind_of_plug_in_is_found():
    assert FRAMEWORKS == ["mindspore", "pytorch"]
    assert {"training", "operator"} <= set(SCENARIOS)
    assert {"gcn", "resnet50", "gru"} <= set(MODELS)
    assert {"cifar10", "cora", "imdb", "multi30k"} <= set(DATASETS)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_framework_backend_conforms(name):
    mod = frameworks.backend(name)
    assert isinstance(mod, contracts.Backend)
    assert problems(contracts.Backend, module_functions(mod), f"harness/frameworks/{name}.py") == []


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_conforms(name):
    mod = importlib.import_module(f"harness.scenarios.{name}")
    assert isinstance(mod, contracts.Scenario)
    assert problems(contracts.Scenario, module_functions(mod), f"harness/scenarios/{name}.py") == []


def test_every_cell_kind_has_a_scenario():
    assert set(SCENARIO_FOR_KIND.values()) <= set(SCENARIOS)


@pytest.mark.parametrize("model, framework", [(m, f) for m in MODELS for f in FRAMEWORKS])
def test_model_file_builds_a_workload_that_conforms(model, framework):
    path = HARNESS / "models" / model / f"{framework}.py"
    assert path.is_file(), f"model {model} has no {framework} file {path}"
    funcs, classes = source_functions(path)
    assert problems(contracts.ModelModule, funcs, str(path)) == []
    ret = ast.parse(path.read_text())
    build = next(n for n in ret.body if isinstance(n, ast.FunctionDef) and n.name == "build")
    returned = [n.value.func.id for n in ast.walk(build) if isinstance(n, ast.Return)
                and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)]
    assert returned and returned[0] in classes, f"{path}: build() does not return an instance of a class defined there"
    assert problems(contracts.ProbedWorkload, classes[returned[0]], f"{path}: {returned[0]}") == []
    if "train_part" in classes[returned[0]]:                      # optional; then it keeps its declared form
        assert problems(contracts.PartialEpochWorkload, classes[returned[0]], f"{path}: {returned[0]}") == []


@pytest.mark.parametrize("model", MODELS)
def test_model_declares_what_it_provides_for_the_passes(model):
    """Either a batch (its package) and a loss (each model file), or why it has no passes: one of the two."""
    package, where = model_package(model), f"harness/models/{model}/__init__.py"
    timed, untimed = isinstance(package, contracts.PassesModel), isinstance(package, contracts.NoPassesModel)
    assert timed != untimed, f"{where}: declare pass_batch (contracts.PassesModel) or NO_PASSES (NoPassesModel)"
    if untimed:
        assert isinstance(package.NO_PASSES, str) and package.NO_PASSES
    else:
        assert problems(contracts.PassesModel, module_functions(package), where) == []
    for framework in FRAMEWORKS:
        path = HARNESS / "models" / model / f"{framework}.py"
        funcs, _ = source_functions(path)
        if timed:
            assert problems(contracts.PassesModelModule, funcs, str(path)) == []
        else:
            assert "pass_loss" not in funcs, f"{path}: a pass_loss for a model that declares NO_PASSES"


def test_the_target_profile_models_that_evaluate_within_an_epoch_can_train_in_parts():
    for cell in matrix.load().expand("target"):
        if cell.spec.evals_per_epoch > 1:
            _, classes = source_functions(HARNESS / "models" / cell.model / f"{cell.framework}.py")
            assert any("train_part" in c for c in classes.values()), cell.id


@pytest.mark.parametrize("name", DATASETS)
def test_dataset_conforms(name):
    mod = datasets.module(name)
    provided = {**required_functions(mod), **{k: None for k in ("FOLDER", "FILES", "URLS") if k in vars(mod)}}
    assert isinstance(mod, contracts.DatasetModule)
    assert problems(contracts.DatasetModule, provided, f"harness/data/{name}.py") == []
    if "prepare" in provided:                                     # optional; then it keeps its declared form
        assert isinstance(mod, contracts.SelfPreparingDataset)
        assert problems(contracts.SelfPreparingDataset, provided, f"harness/data/{name}.py") == []


def test_every_dataset_of_the_matrix_is_a_dataset_module():
    named = {m["dataset"] for m in matrix.load().data["models"].values()}
    assert named <= set(DATASETS)


def test_no_hasattr_probes_a_plug_in():
    """contracts.py's promise: hasattr appears only on the standard library's modules (a platform's features)."""
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr" and not (
                    isinstance(node.args[0], ast.Name) and node.args[0].id in ("os", "tarfile")):
                found.append(f"{path.relative_to(HARNESS.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found


@pytest.mark.parametrize("folder, framework", [(d, f) for d in PER_FRAMEWORK for f in FRAMEWORKS])
def test_operator_passes_and_inference_files_conform(folder, framework):
    path = HARNESS / folder / f"{framework}.py"
    assert path.is_file(), f"framework {framework} has no {folder} file {path}"
    funcs, _ = source_functions(path)
    assert problems(PER_FRAMEWORK[folder], funcs, str(path)) == []


def model_names_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant in the source that is a model's name."""
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]


def test_no_code_that_runs_models_asks_for_one_by_name():
    """What differs between models is what each declares (contracts.PassesModel, NoPassesModel, PassesModelModule);
    the passes, the scenarios and the inference nets name no model of the matrix."""
    names = set(matrix.load().data["models"])
    found = [f"{path.relative_to(HARNESS.parent)}:{line}: {name!r}"
             for folder in ("passes", "scenarios", "inference") for path in sorted((HARNESS / folder).rglob("*.py"))
             for line, name in model_names_in(path.read_text(), names)]
    assert not found, found
    assert model_names_in('if model == "gru":\n    loss = masked_ce\n', names) == [(1, "gru")]  # the check can fail


def test_the_check_fails_for_a_plug_in_that_lacks_a_piece_or_misnames_a_parameter():
    """The conformance check can fail: a back-end without layer_count and with a renamed parameter."""
    good = module_functions(frameworks.backend("pytorch"))
    bad = {k: v for k, v in good.items() if k != "layer_count"} | {"setup": ["context"]}
    found = problems(contracts.Backend, bad, "fake")
    assert found == ["fake.setup takes ['context'], the contract says ['ctx']", "fake lacks 'layer_count' (Backend)"]
    assert not isinstance(SimpleNamespace(**{k: print for k in bad}), contracts.Backend)
