import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("HARNESS_SHARED_DATA", REPO.parent / "shared" / "data"))
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


def harness(*args, timeout=900, extra_env=None, **kw):
    """Run `python -m harness ARGS` as a user would; returns the CompletedProcess."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env, **kw)


@pytest.fixture
def shared_data():
    if not (SHARED_DATA / "cora_planetoid").is_dir():
        pytest.skip(f"no real data at {SHARED_DATA}")
    return SHARED_DATA


def write_matrix(path: Path, *, epochs: int = 5, timeout_s: int = 600, frameworks=("pytorch",),
                 modes=("eager",), extra: str = "") -> Path:
    """A small matrix file of the real format: GCN only, few epochs."""
    text = (REPO / "harness" / "config" / "matrix.toml").read_text()
    text = text.replace("profile.quick = { epochs = 30 }", f"profile.quick = {{ epochs = {epochs} }}")
    head, _, rest = text.partition("[profiles.quick]")
    # The other profiles stay (model tables name them); only the quick profile is replaced.
    others = rest[rest.index("[profiles."):] if "[profiles." in rest else ""
    path.write_text(head + others + f"""
[profiles.quick]
models = ["gcn"]
frameworks = {list(frameworks)!r}
modes = {list(modes)!r}
amp = ["off"]
devices = [1]
repeats = 1
timeout_s = {timeout_s}
""".replace("'", '"') + extra)
    return path


def with_quick_pynative(text: str) -> str:
    """Matrix text with the quick profile's PYNATIVE scaling and operator cells put back: the quick profile leaves them
    out to keep to its 15 minutes; the tests of the launchers' and the operators' PYNATIVE paths need them."""
    blocks = text.split("[[exclude]]")
    kept = [b for b in blocks[1:] if "fair baseline mode only" not in b and "leaves PYNATIVE's operators" not in b]
    assert len(kept) == len(blocks) - 3, "the quick profile's two PYNATIVE exclusions moved: update this helper"
    return "[[exclude]]".join([blocks[0], *kept])


def quick_pynative_matrix(path: Path) -> Path:
    path.write_text(with_quick_pynative((REPO / "harness" / "config" / "matrix.toml").read_text()))
    return path


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


def copy_reproduce(clone: Path) -> None:
    """reproduce.sh into a stand-in clone, with the one file it sources (tools/unexpected.sh: its line for a failure no
    line of it foresaw)."""
    import shutil

    (clone / "tools").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "reproduce.sh", clone / "reproduce.sh")
    shutil.copy(REPO / "tools" / "unexpected.sh", clone / "tools" / "unexpected.sh")
