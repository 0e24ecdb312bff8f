"""Conformance: every framework back-end, scenario, model folder (harness.conformance: its package, framework
files, event-log rules and reference loops), operator, passes and inference file and dataset provides what
harness/contracts.py declares, with the declared parameter names. Back-ends, scenarios, model packages and datasets
are imported (they import no framework at module level); model, reference, operator, passes and inference files are
read as source (ast), so the check needs neither PyTorch nor MindSpore and a new model or framework that lacks a piece
fails here, naming it (tests/test_extending.py adds one in a scratch tree). No code probes with hasattr what a
plug-in provides (what one may provide beyond its contract is a Protocol of its own), none that runs models asks for
one by name, and no shared module names a model or a dataset."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import conformance, contracts, frameworks, scenarios
from harness import data as datasets
from harness.config import matrix
from harness.conformance import module_functions, problems, source_functions
from harness.scenarios import SCENARIO_FOR_KIND

HARNESS = Path(__file__).resolve().parent.parent / "harness"
FRAMEWORKS = sorted(m.name for m in pkgutil.iter_modules(frameworks.__path__))
SCENARIOS = sorted(m.name for m in pkgutil.iter_modules(scenarios.__path__))
MODELS = conformance.models()
DATASETS = conformance.datasets()
# One file per framework in each of these folders, and the contract it keeps.
PER_FRAMEWORK = {"scenarios/operator": contracts.OperatorModule, "scenarios/passes": contracts.PassesModule,
                 "scenarios/inference": contracts.InferenceModule}


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


@pytest.mark.parametrize("model", MODELS)
def test_every_model_folder_is_whole(model):
    """Its package (MLPERF_KEYS, what it declares for the passes), each framework's file and its workload class, its
    event-log rules and each framework's reference loop (harness.conformance, which `harness run` and `harness
    list` also apply)."""
    assert conformance.model_problems(model) == []


def test_the_target_profile_models_that_evaluate_within_an_epoch_can_train_in_parts():
    for cell in matrix.load().expand("target"):
        if cell.spec.evals_per_epoch > 1:
            _, classes = source_functions(HARNESS / "models" / cell.model / f"{cell.framework}.py")
            assert any("train_part" in c for c in classes.values()), cell.id


@pytest.mark.parametrize("name", DATASETS)
def test_dataset_conforms(name):
    mod = datasets.module(name)
    assert isinstance(mod, contracts.DatasetModule)
    assert conformance.dataset_problems(name) == []


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
             for path in sorted((HARNESS / "scenarios").rglob("*.py"))
             for line, name in model_names_in(path.read_text(), names)]
    assert not found, found
    assert model_names_in('if model == "gru":\n    loss = masked_ce\n', names) == [(1, "gru")]  # the check can fail


# The study's own published figures, per model: the paper's claims and the companion studies' numbers.
STUDY_FIGURES = {"harness/claims/paper.py", "harness/config/study.py", "harness/report/companion.py"}


def test_no_shared_module_names_a_model_or_a_dataset():
    """What is particular to a model is in its folder, to a dataset in its file (the event log's optimiser, schedule
    and validation split included): outside harness/models/ and harness/data/, only the study's published figures
    name one."""
    names = set(MODELS) | set(DATASETS)
    found = [f"{path.relative_to(HARNESS.parent)}:{line}: {name!r}" for path in sorted(HARNESS.rglob("*.py"))
             if path.relative_to(HARNESS).parts[0] not in ("models", "data")
             and str(path.relative_to(HARNESS.parent)) not in STUDY_FIGURES
             for line, name in model_names_in(path.read_text(), names)]
    assert not found, found


def test_a_reference_loop_that_imports_the_harness_fails_the_check(tmp_path, monkeypatch):
    """A reference loop may share the framework-neutral model packages with the harness, nothing else."""
    path = tmp_path / "reference_pytorch.py"
    path.write_text("from harness.models.gcn import init_weights\nfrom harness.models.gcn.pytorch import GCN\n"
                    "from harness.models._pytorch import compiled\n")
    monkeypatch.setattr(conformance, "_rel", lambda p: p.name)
    found = [p for p in conformance._reference_problems(path) if "imports" in p]
    assert [p.split(":")[0] for p in found] == ["reference_pytorch.py imports harness.models.gcn.pytorch",
                                                "reference_pytorch.py imports harness.models._pytorch"]


def test_the_check_fails_for_a_plug_in_that_lacks_a_piece_or_misnames_a_parameter():
    """The conformance check can fail: a back-end without layer_count and with a renamed parameter."""
    good = module_functions(frameworks.backend("pytorch"))
    bad = {k: v for k, v in good.items() if k != "layer_count"} | {"setup": ["context"]}
    found = problems(contracts.Backend, bad, "fake")
    assert found == ["fake.setup takes ['context'], the contract says ['ctx']", "fake lacks 'layer_count' (Backend)"]
    assert not isinstance(SimpleNamespace(**{k: print for k in bad}), contracts.Backend)
