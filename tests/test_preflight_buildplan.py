"""harness/preflight/buildplan.py, the lines around a build of `./reproduce.sh PLATFORM --build`: the plan before it
(host.toml's figures), and after it what it took, measured (its time, what it holds as `du -sk` counts it, the free
disk as `df -Pk` says it), "unknown" where a figure cannot be read. tests/test_preflight_venvbuild.py and
tests/test_preflight_shell.py run them as .venv's build and an image's do."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.preflight import buildplan, data
from tests.conftest import REPO


@pytest.mark.parametrize("seconds, kb, before, after, said", [
    (125.9, 4_000_000, 20_000_000, 16_000_000, "in 2 min 5 s; it holds 4.1 GB; free disk at /x: 20.5 GB before, "
                                               "16.4 GB after"),
    (0.2, 0, None, None, "in 0 min 0 s; it holds 0.0 GB; free disk at /x: unknown before, unknown after"),
    (3600, None, 1, 0, "in 60 min 0 s; it holds unknown; free disk at /x: 0.0 GB before, 0.0 GB after"),
])
def test_the_line_after_a_build_gives_its_minutes_and_seconds_and_gigabytes(seconds, kb, before, after, said):
    assert buildplan.built(".venv", seconds, kb, "/x", before, after) == f"reproduce.sh: built .venv {said}"


def test_the_free_disk_is_what_df_says_is_available_and_unknown_where_unreadable(tmp_path, monkeypatch):
    st = os.statvfs(tmp_path)
    with monkeypatch.context() as m:   # one reading: other writers move the disk between two (CI builds images beside)
        m.setattr(buildplan.os, "statvfs", lambda path: st)
        assert buildplan.free_kb(str(tmp_path)) == st.f_bavail * st.f_frsize // 1024
    assert buildplan.free_kb(str(tmp_path / "not-there")) is None
    if shutil.which("df"):
        df = subprocess.run(["df", "-Pk", str(tmp_path)], capture_output=True, text=True).stdout.splitlines()[1]
        assert abs(int(df.split()[3]) - buildplan.free_kb(str(tmp_path))) < 100_000   # the disk may move meanwhile


def test_what_a_folder_holds_is_what_du_counts_each_hard_link_once(tmp_path):
    tree = tmp_path / "venv"
    (tree / "lib" / "deep").mkdir(parents=True)
    (tree / "lib" / "big").write_bytes(os.urandom(300_000))
    os.link(tree / "lib" / "big", tree / "lib" / "same")          # a hard link: counted once
    (tree / "bin").mkdir()
    (tree / "bin" / "python").symlink_to(sys.executable)           # a link: itself, not what it points at
    (tree / "lib64").symlink_to("lib")
    (tree / "lib" / "deep" / "small").write_text("x")
    kb = buildplan.disk_kb(str(tree))
    assert 290 <= kb < 400
    if shutil.which("du"):
        du = subprocess.run(["du", "-sk", str(tree)], capture_output=True, text=True).stdout.split()[0]
        assert kb == int(du)
    assert buildplan.disk_kb(str(tmp_path / "not-there")) is None


def test_a_size_in_kb_is_said_in_gb_as_the_disk_figures_are():
    assert [buildplan.gb(k) for k in (None, 0, 48_828, 4_000_000)] == ["unknown", "0.0 GB", "0.0 GB", "4.1 GB"]


def test_the_plan_names_what_is_built_its_download_disk_and_time(tmp_path):
    host = data.host()
    line = buildplan.plan("cpu", "native", str(tmp_path), host)
    assert line.startswith(f"reproduce.sh: --build makes .venv from requirements/cpu.txt: downloads "
                           f"{host['build']['cpu-native']['download']}; needs {host['disk']['cpu']['native_gb']} GB "
                           f"free at {tmp_path} (")
    assert line.endswith(f" GB free there now); takes {host['build']['cpu-native']['time']}")
    unreadable = buildplan.plan("ascend", "container", str(tmp_path / "not-there"), host)
    assert f"needs {host['disk']['ascend']['build_gb']} GB free at {tmp_path}/not-there (its free space unreadable)" \
        in unreadable and unreadable.startswith("reproduce.sh: --build makes the image of Dockerfile.ascend: ")


def test_it_runs_without_site_packages_and_under_the_oldest_python_it_claims(tmp_path):
    """Standard library only (python -S) and Python 3.8's syntax: the host's python3 runs it before any .venv exists
    (and harness/preflight/venvbuild.py, which the same python3 may run, imports it)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = ["-m", "harness.preflight.buildplan", "cuda", "container", str(tmp_path)]
    new = subprocess.run([sys.executable, "-S", *cmd], capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert new.returncode == 0, new.stderr
    assert new.stdout.startswith("reproduce.sh: --build makes the image of Dockerfile.cuda")
    old = next((str(p) for p in Path(os.path.expanduser("~/.pyenv/versions")).glob("3.8*/bin/python")), None)
    if not old:
        pytest.skip("no Python 3.8 here")
    for module in ("harness.preflight.buildplan", "harness.preflight.venvbuild"):
        proc = subprocess.run([old, "-c", f"import {module}"], capture_output=True, text=True, timeout=60, cwd=REPO,
                              env=env)
        assert proc.returncode == 0, proc.stderr
    assert subprocess.run([old, *cmd], capture_output=True, text=True, timeout=60, cwd=REPO, env=env).stdout.split(
        "(")[0] == new.stdout.split("(")[0]
