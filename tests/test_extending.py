"""A model is its folder and a matrix entry, a dataset is one file: shown by adding both to a scratch copy of the tree.
 The toy model (tests/fixtures/toy/model/, copied to harness/models/toy/) and the toy dataset
(tests/fixtures/toy/toyblobs.py, copied to harness/data/toyblobs.py) plus the toy's matrix entry
(tests/fixtures/toy/matrix_entry.toml, appended to harness/config/matrix.toml, and `toy` in the quick profile's models)
are all that differs from this checkout. In that tree the toy passes the contract, equivalence and reference tests, runs
a quick cell in each framework and mode on its real (written) data, writes event logs that MLPerf's checker accepts, and
is among the cells the image checks run. Taking away any one part makes `harness list` and `harness run` stop in one
line that names the file and the part, exit 2, before any run folder is made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

TOY = REPO / "tests" / "fixtures" / "toy"
COPIED = ("harness", "tests", "templates", "pyproject.toml")   # what the scratch tree's harness and tests need
TOY_FILES = {f"harness/models/toy/{p.name}" for p in (TOY / "model").iterdir() if p.suffix in (".py", ".yaml")} | {
    "harness/data/toyblobs.py"}
QUICK_MODELS = re.compile(r'(\[profiles\.quick\][^\[]*?\nmodels = \[)([^\]]*)\]')


def _ignore(folder, names):
    return [n for n in names if n in ("__pycache__", ".pytest_cache") or n.endswith(".pyc")]


def add_toy(root: Path) -> None:
    """The toy model's folder, the toy dataset's file and the toy's matrix entry, into the tree at root."""
    shutil.copytree(TOY / "model", root / "harness" / "models" / "toy", ignore=_ignore)
    shutil.copy(TOY / "toyblobs.py", root / "harness" / "data" / "toyblobs.py")
    matrix = root / "harness" / "config" / "matrix.toml"
    text, n = QUICK_MODELS.subn(lambda m: f'{m.group(1)}{m.group(2)}, "toy"]', matrix.read_text(), count=1)
    assert n == 1, "the quick profile's models line moved: update QUICK_MODELS"
    matrix.write_text(text + (TOY / "matrix_entry.toml").read_text())


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("extending") / "tree"
    root.mkdir()
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=_ignore)
        else:
            shutil.copy(src, root / name)
    add_toy(root)
    return root


def run(root: Path, *args: str, timeout: int = 900, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), **kw.pop("env", {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=root, env=env,
                          timeout=timeout, **kw)


def files(root: Path, names=COPIED) -> dict[str, bytes]:
    out = {}
    for name in names:
        base = root / name
        for p in ([base] if base.is_file() else base.rglob("*")):
            if p.is_file() and not _ignore(None, list(p.relative_to(root).parts)):
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_the_toy_is_a_folder_a_file_and_a_matrix_entry(tree):
    ours, theirs = files(REPO), files(tree)
    assert set(theirs) - set(ours) == TOY_FILES
    assert set(ours) - set(theirs) == set()
    assert {p for p in ours if ours[p] != theirs[p]} == {"harness/config/matrix.toml"}


def test_the_toy_passes_the_contract_equivalence_and_reference_tests(tree):
    contracts = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/test_contracts.py")
    assert contracts.returncode == 0, contracts.stdout[-3000:]
    assert re.search(r"test_every_model_folder_is_whole\[toy\]", run(
        tree, "-m", "pytest", "-q", "--collect-only", "-p", "no:xdist", "tests/test_contracts.py").stdout)
    toy = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-k", "toy",
              "tests/test_equivalence.py", "tests/test_reference.py")
    assert toy.returncode == 0, toy.stdout[-3000:]
    # equivalence: GRAPH and PYNATIVE against PyTorch; the reference loops: PyTorch eager, MindSpore GRAPH, PYNATIVE
    assert re.search(r"\b5 passed\b", toy.stdout), toy.stdout[-2000:]


def test_a_quick_cell_of_the_toy_in_each_framework_passes_mlperfs_checker(tree, tmp_path):
    out, data = tmp_path / "run", tmp_path / "data"
    p = run(tree, "-m", "harness", "run", "--platform", "cpu", "--profile", "quick", "--only",
            "model/toy/*/amp-off/1dev", "--repeats", "1", "--max-repeats", "1", "--data-dir", str(data), "--download",
            "--out", str(out), env={"HARNESS_PROFILE": "off"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert (data / "toyblobs" / "blobs.csv").is_file()   # its real data, written by the dataset's own prepare()
    results = json.loads(run(tree, "-m", "harness", "results", str(out), "--json").stdout)
    assert sorted((r["framework"], r["mode"], r["status"]) for r in results) == [
        ("mindspore", "graph", "ok"), ("mindspore", "pynative", "ok"), ("pytorch", "eager", "ok")]
    assert all(r["best_metric"] > 0.8 for r in results), [(r["cell"], r["best_metric"]) for r in results]
    check = run(tree, "-m", "harness", "check-logs", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    assert [line.split()[0] for line in check.stdout.splitlines()[:3]] == ["SUCCESS"] * 3, check.stdout
    mllog = next(out.rglob("r0.mllog")).read_text()
    assert '"key": "eval_samples", "value": 60' in mllog          # the dataset's val_split_size
    assert '"key": "opt_name", "value": "adam"' in mllog          # the model's MLPERF_KEYS


def test_the_image_checks_run_a_cell_of_the_toy(tree):
    p = run(tree, "-m", "harness", "list", "--profile", "quick", "--one-per-model")
    assert p.returncode == 0, p.stderr
    ids = [line.split()[0] for line in p.stdout.splitlines()]
    assert len([i for i in ids if i.startswith("model/toy/")]) == 1, ids
    assert "--one-per-model" in (REPO / "tools" / "check_image.sh").read_text()   # the list the image checks run


def _drop(pattern: str):
    """An edit that takes `pattern` (a regular expression, multi-line) out of a file."""
    return lambda text: re.sub(pattern, "", text, count=1, flags=re.M | re.S)


# (file, how it is broken: None removes it, else an edit of its text, what the error must say)
PARTS = [
    ("harness/models/toy/__init__.py", None, "harness/models/toy/__init__.py is missing: a model is a folder"),
    ("harness/models/toy/__init__.py", _drop(r"^MLPERF_KEYS = .*?\n"),
     "harness/models/toy/__init__.py: lacks MLPERF_KEYS"),
    ("harness/models/toy/__init__.py", _drop(r"^NO_PASSES = .*?\n"),
     "harness/models/toy/__init__.py: declares neither pass_batch (contracts.PassesModel) nor NO_PASSES"),
    ("harness/models/toy/__init__.py", _drop(r"^NO_ACCUMULATION = .*?\n"),
     "harness/models/toy/__init__.py: declares neither micro_batches (contracts.AccumulatingModel) nor "
     "NO_ACCUMULATION"),
    ("harness/models/toy/pytorch.py", None, "harness/models/toy/pytorch.py is missing"),
    ("harness/models/toy/mindspore.py", None, "harness/models/toy/mindspore.py is missing"),
    ("harness/models/toy/mindspore.py", _drop(r"^def build\(.*"), "harness/models/toy/mindspore.py lacks 'build'"),
    ("harness/models/toy/pytorch.py", _drop(r"^    def probe_loss\(.*?\n\n"),
     "harness/models/toy/pytorch.py: Workload lacks 'probe_loss'"),
    ("harness/models/toy/logcheck.yaml", None, "harness/models/toy/logcheck.yaml is missing"),
    ("harness/models/toy/reference_pytorch.py", None, "harness/models/toy/reference_pytorch.py is missing"),
    ("harness/models/toy/reference_mindspore.py", None, "harness/models/toy/reference_mindspore.py is missing"),
    ("harness/data/toyblobs.py", None, "harness/data/toyblobs.py is missing: a dataset is one file"),
    ("harness/data/toyblobs.py", _drop(r"^def val_split_size\(.*?\n\n\n"),
     "harness/data/toyblobs.py lacks 'val_split_size'"),
    ("harness/data/toyblobs.py", _drop(r"^EVAL_LIMITED = .*?\n"), "harness/data/toyblobs.py lacks 'EVAL_LIMITED'"),
]


@pytest.mark.parametrize(("path", "edit", "said"), PARTS, ids=[f"{p}-{'removed' if e is None else s.split()[-1]}"
                                                              for p, e, s in PARTS])
def test_a_missing_part_stops_list_and_run_in_one_line(tree, tmp_path, path, edit, said):
    target = tree / path
    kept = target.read_bytes()
    try:
        if edit is None:
            target.unlink()
        else:
            changed = edit(kept.decode())
            assert changed != kept.decode(), f"the edit found nothing to take out of {path}"
            target.write_text(changed)
        for args in (("list", "--profile", "quick"),
                     ("run", "--platform", "cpu", "--profile", "quick", "--only", "model/toy/*", "--synthetic",
                      "--out", str(tmp_path / "run"))):
            p = run(tree, "-m", "harness", *args, timeout=120)
            lines = p.stderr.strip().splitlines()
            assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, (args, p.stderr)
            assert lines[0].startswith(f"error: {said}") and "docs/developers.md" in lines[0], lines[0]
            assert not (tmp_path / "run").exists()
    finally:
        target.write_bytes(kept)
