"""A Python with only one of the two frameworks (a GPU host with PyTorch and no MindSpore, say): the harness
records the other framework's cells as skipped, with the reason, and `reproduce.sh --native` accepts that
Python and says which cells it leaves out. A framework is hidden the way a missing install looks to Python:
`sys.modules[name] = None` in a sitecustomize (find_spec returns None, import raises ModuleNotFoundError)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.host import platforms
from tests.helpers import REPO, run_reproduce, write_matrix


def _hiding(tmp_path: Path, *modules: str) -> dict:
    """Environment for a Python in which `modules` are not installed."""
    shim = tmp_path / f"hide-{'-'.join(modules)}"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules))
    return {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{REPO}"}


def _run(env: dict, *args):
    return subprocess.run([sys.executable, "-m", "harness", "run", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=env)


def _results(out: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["cell"]: json.loads(p.read_text())
            for p in (out / "cells").rglob("r0.json")}


def test_missing_framework_names_the_module_and_the_python(monkeypatch):
    assert platforms.missing_framework("pytorch", "cpu") is None  # the test environment has both
    monkeypatch.setitem(sys.modules, "mindspore", None)
    why = platforms.missing_framework("mindspore", "cuda")
    assert why.startswith("mindspore is not installed in this Python") and sys.executable in why
    assert "no module mindspore" in why
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    assert platforms.missing_framework("pytorch", "cpu") is None
    assert "no module torch_npu" in platforms.missing_framework("pytorch", "ascend")


def test_cells_of_a_missing_framework_are_skipped_and_rerun_once_it_is_there(tmp_path):
    m = write_matrix(tmp_path / "m.toml", epochs=3, frameworks=("pytorch", "mindspore"), modes=("eager", "graph"))
    out = tmp_path / "run"
    proc = _run(_hiding(tmp_path, "mindspore"), "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    assert proc.returncode == 0, proc.stderr
    results = _results(out)
    ms = results["model/gcn/mindspore/graph/amp-off/1dev"]
    assert ms["status"] == "skipped" and ms["reason"].startswith("mindspore is not installed in this Python")
    assert results["model/gcn/pytorch/eager/amp-off/1dev"]["status"] == "ok"
    assert "mindspore is not installed in this Python" in proc.stderr and "its 1 cells are recorded as skipped" \
        in proc.stderr

    # --resume in the same Python keeps both: the ok cell, and the skipped one, whose reason still holds.
    proc = _run(_hiding(tmp_path, "mindspore"), "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m,
                "--resume")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("kept (") == 2, proc.stderr


def test_a_skipped_cell_runs_on_resume_once_its_framework_is_installed(tmp_path):
    m = write_matrix(tmp_path / "m.toml", epochs=3)
    out = tmp_path / "run"
    proc = _run(_hiding(tmp_path, "torch"), "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    assert proc.returncode == 0, proc.stderr
    cell = "model/gcn/pytorch/eager/amp-off/1dev"
    assert _results(out)[cell]["status"] == "skipped"
    proc = _run({**os.environ, "PYTHONPATH": str(REPO)}, "--platform", "cpu", "--out", out, "--synthetic",
                "--matrix", m, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert _results(out)[cell]["status"] == "ok"
    assert "earlier result (skipped) kept as" in proc.stderr


def _python_without(tmp_path: Path, *modules: str) -> Path:
    env = _hiding(tmp_path, *modules)
    wrapper = tmp_path / f"python-without-{'-'.join(modules)}"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH='{env['PYTHONPATH']}' exec '{sys.executable}' \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def _gpu_dev(tmp_path: Path) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").touch()
    return dev


def test_reproduce_native_accepts_a_python_with_pytorch_only_and_says_what_it_leaves_out(tmp_path):
    py = _python_without(tmp_path, "mindspore")
    proc = run_reproduce(tmp_path, "cuda", "--native", "--dry-run", "--only", "model/gcn/*", "--out", tmp_path / "o",
                         dev=_gpu_dev(tmp_path), env={"PYTHON": str(py)})
    assert proc.returncode == 0, proc.stderr
    assert f"{py} -m harness run --platform cuda --profile accelerator" in proc.stdout  # a GPU host's default
    said = [line for line in proc.stderr.splitlines() if "left out" in line]
    assert len(said) == 1 and f"{py} has no mindspore for cuda: its 6 of 10 cells are left out" in said[0]
    assert "model/gcn/mindspore/graph/amp-off/1dev" in said[0]


def test_reproduce_native_refuses_a_python_with_none_of_the_needed_frameworks_in_one_line(tmp_path):
    py = _python_without(tmp_path, "mindspore")
    proc = run_reproduce(tmp_path, "cuda", "--native", "--only", "model/gcn/mindspore/*", "--out", tmp_path / "o",
                         dev=_gpu_dev(tmp_path), env={"PYTHON": str(py)})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"reproduce.sh: {py} has none of the frameworks the selected "
                                                   "cells need (mindspore)"), proc.stderr
    assert not (tmp_path / "o").exists()
