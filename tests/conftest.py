"""Fixtures and hooks of the suite. Helpers shared by test modules are in tests/helpers.py; the names below are
imported from there for the modules that still import them from here."""

import os
import subprocess
import sys

import pytest

pytest.register_assert_rewrite("tests.helpers")  # its asserts report as a test's do

from tests.helpers import (  # noqa: E402, F401 (re-exported)
    COLLECTED,
    REPO,
    SHARED_DATA,
    copy_reproduce,
    harness,
    is_slow,
    quick_pynative_matrix,
    slow_entries,
    with_quick_pynative,
    write_matrix,
)

# The profiled pass (harness.profiling) adds a profiled epoch to every model cell's first repeat: the suite runs without
# it, except where a test asks for it (the end-to-end GCN run, tests/test_profiling.py), to keep CI in its time.
os.environ.setdefault("HARNESS_PROFILE", "off")


# Test files that share an expensive session fixture, mapped to one name: pytest-xdist's `--dist loadfile` (tox.ini)
# then runs them on one worker, so the fixture is built once (the scaling run: about 100 s on 2 cores).
ONE_WORKER = {"tests/test_multinode.py": "tests/test_scaling.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return ONE_WORKER.get(scope, scope)

    return SharedFixtureScheduling(config, log)


@pytest.fixture
def shared_data():
    if not (SHARED_DATA / "cora_planetoid").is_dir():
        pytest.skip(f"no real data at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def scaling_run(tmp_path_factory):
    """ResNet50's 1- and 2-process cells in PyTorch eager and MindSpore PYNATIVE's 2-process cell, one repeat each,
    at the quick profile's sizes (its PYNATIVE scaling cells put back), run as reproduce.sh runs the harness: this
    interpreter by its path, no virtual environment's bin/ on PATH (the launchers' workers must still get this
    interpreter). `out`: the run folder; `results`: cell id -> its repeat 0. MindSpore GRAPH's 2-process cell runs in
    tests/test_multinode.py (on one core, as the two-node cells' reference)."""
    import json
    from types import SimpleNamespace

    out = tmp_path_factory.mktemp("scaling") / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    m = quick_pynative_matrix(tmp_path_factory.mktemp("matrix") / "m.toml")
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--out", str(out), "--synthetic",
                        "--only", "*/resnet50/pytorch/eager/amp-off/*,scaling/resnet50/mindspore/pynative/amp-off/2dev",
                        "--repeats", "1", "--matrix", str(m)], capture_output=True, text=True, timeout=1200, cwd=REPO,
                       env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    results = {r["cell"]: r for r in json.loads(harness("results", out, "--json").stdout) if r["repeat"] == 0}
    return SimpleNamespace(out=out, results=results)


# -- the slow set: `pytest -m "not slow"` is the fast unit set --------------------------------------------------------
@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marker
def pytest_collection_modifyitems(config, items):
    entries = set(slow_entries())
    for item in items:
        if is_slow(item.nodeid, entries):
            item.add_marker(pytest.mark.slow)
    if not any("::" in arg for arg in config.args):
        config.stash[COLLECTED] = [item.nodeid for item in items]
