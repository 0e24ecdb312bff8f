"""The check's Python and .venv rows on cpu natively: the base Python must be 3.11 and able to make a venv (Debian and
Ubuntu ship venv's ensurepip apart, in python3.11-venv, which --build installs as root with apt-get), and a .venv
without reproduce.sh's stamp is a build that did not finish, made again by --build. Facts built by hand, as
host.collect() gathers them; one end-to-end --check on a clone with a half-made .venv."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.preflight import FAIL, NEXT, NOTE, PASS, checks_common, data, render
from harness.preflight.__main__ import _why_no_step
from harness.preflight.host import Host, Output, collect
from tests.conftest import REPO, copy_reproduce
from tests.helpers import path_without_engines as _path_with_python

PY = "/usr/bin/python3.11"


def _host(version: str | None = "3.11.2", venv_module: bool = True, uid: int = 1000, apt_get: str | None = None,
          venv: dict | None = None, base: str = PY) -> Host:
    outputs = {}
    if version:
        outputs["python-version"] = Output(0, version + "\n")
        outputs["python-venv"] = Output(0 if venv_module else 1, "" if venv_module else "ModuleNotFoundError")
    return Host("cpu", outputs, {"mode": "native", "base_python": base, "uid": uid, "apt_get": apt_get,
                                 "venv": venv or {"python": None, "stamp": False, "stamp_ok": False}})


def _rows(h: Host) -> dict:
    return {r.check: r for r in checks_common.python_rows(h, data.host())}


def test_python_311_that_can_make_a_venv_passes():
    row = _rows(_host())["Python 3.11"]
    assert row.verdict == PASS and row.found == f"{PY}: Python 3.11.2, venv and ensurepip"


def test_debian_13s_python_313_names_the_container_and_python():
    h = _host("3.13.5", base="/usr/bin/python3")
    row = _rows(h)["Python 3.11"]
    assert row.verdict == FAIL
    assert render.failures([row], "reproduce.sh") == [
        "reproduce.sh: /usr/bin/python3 is Python 3.13.5, and the lock pins wheels for Python 3.11; add --container to "
        "run in the CPU image (docker or podman; no host Python needed), or install Python 3.11 and set "
        "PYTHON=/path/to/python3.11"]


@pytest.mark.parametrize("got, same", [("3.11.2", True), ("3.11", True), ("3.11.0rc1", True), ("3.1.4", False),
                                       ("3.110.1", False), ("3.12.3", False), ("", False)])
def test_the_locks_python_is_told_by_major_and_minor_alone(got, same):
    # the one answer the check's row and the .venv build (venvbuild.prepare) both take
    assert checks_common.is_locks_python(got, "3.11") is same
    assert (_rows(_host(got or None))["Python 3.11"].verdict == PASS) is same


def test_python_311_without_venv_as_root_with_apt_get_waits_for_build():
    rows = checks_common.python_rows(_host(venv_module=False, uid=0, apt_get="/usr/bin/apt-get"), data.host())
    row = rows[1]
    assert row.verdict == NEXT and row.ok()
    assert row.found == f"{PY}: Python 3.11.2, no venv/ensurepip module (python3.11-venv not installed)"
    assert row.note == f"./reproduce.sh cpu --build installs python3.11-venv (apt-get) before it makes .venv with {PY}"
    assert render.next_step(rows, "./reproduce.sh cpu", "quick").startswith("ready to build: next, ./reproduce.sh cpu "
                                                                             "--build")


@pytest.mark.parametrize("uid, apt_get", [(1000, "/usr/bin/apt-get"), (0, None)])
def test_python_311_without_venv_as_a_user_is_the_line_to_give_root(uid, apt_get):
    row = _rows(_host(venv_module=False, uid=uid, apt_get=apt_get))["Python 3.11"]
    assert row.verdict == FAIL
    assert render.failures([row], "reproduce.sh") == [
        f"reproduce.sh: {PY} cannot make a venv (no ensurepip/venv module): as root, apt-get install python3.11-venv "
        "(Debian/Ubuntu), or add --container to run in the CPU image"]


def test_a_made_venv_needs_no_base_python():
    row = _rows(_host("3.12.3", venv={"python": "/x/.venv/bin/python", "stamp": True, "stamp_ok": True}))
    assert row["Python 3.11"].verdict == PASS and row["Python 3.11"].found.endswith("(not needed: .venv is made)")


def test_a_venv_without_its_stamp_is_an_unfinished_build_and_no_step_runs_in_it():
    h = _host(venv={"python": "/x/.venv/bin/python", "stamp": False, "stamp_ok": False})
    row = _rows(h)[".venv"]
    assert row.verdict == NEXT and row.found == ".venv present: an interrupted or unfinished build (no stamp)"
    assert row.note.startswith("an interrupted or unfinished build (no stamp): ./reproduce.sh cpu --build makes it "
                               "again")
    why = _why_no_step(h, data.cuda())
    assert why == checks_common.UNFINISHED
    h.facts["step_not_run"] = {"pytorch": why, "mindspore": why}
    steps = checks_common.step_rows(h, "cpu")
    assert [r.verdict for r in steps] == [NEXT, NEXT]
    # a stamp of another lock is still a finished .venv: the steps run in it, the row a note
    h.facts["venv"]["stamp"] = True
    assert _why_no_step(h, data.cuda()) is None and _rows(h)[".venv"].verdict == NOTE


def test_collect_asks_the_base_python_whether_it_can_make_a_venv(tmp_path):
    fake = tmp_path / "python3.11"
    fake.write_text('#!/bin/sh\ncase "$2" in *ensurepip*) exit 1 ;; esac\necho 3.11.2\n')
    fake.chmod(0o755)
    h = collect("cpu", mode="native", env={"PYTHON": str(fake), "PATH": str(tmp_path)})
    assert h.facts["base_python"] == str(fake) and h.out("python-venv").rc == 1
    assert h.out("python-version").text.strip() == "3.11.2"
    assert h.facts["uid"] == os.getuid() and h.facts["apt_get"] is None
    assert set(h.facts["venv"]) == {"python", "stamp", "stamp_ok"}


def test_check_after_an_interrupted_build_is_ready_to_build_again(tmp_path):
    """The half-made .venv an interrupted --build (or one without ensurepip) leaves: no stamp, no numpy. --check
    used to call it "present, not made from this lock" and fail both training steps in it."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "harness", clone / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    copy_reproduce(clone)
    (clone / "requirements").mkdir()
    shutil.copy(REPO / "requirements" / "cpu.txt", clone / "requirements" / "cpu.txt")
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").symlink_to(Path(_path_with_python(tmp_path)) / "python3")
    base = tmp_path / "python3.11"   # a 3.11 that can make a venv, whoever runs the test
    base.write_text('#!/bin/sh\ncase "$2" in *ensurepip*) exit 0 ;; esac\necho 3.11.2\n')
    base.chmod(0o755)
    proc = subprocess.run(["bash", str(clone / "reproduce.sh"), "cpu", "--check"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "PATH": _path_with_python(tmp_path),
                                                         "PYTHON": str(base)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split("  ")[0]: line for line in proc.stdout.splitlines()}
    assert rows[".venv"].rstrip().endswith("not built") and "unfinished build" in rows[".venv"]
    assert rows["training step: PyTorch"].rstrip().endswith("not built")
    assert rows["training step: MindSpore"].rstrip().endswith("not built")
    assert ("note: .venv: an interrupted or unfinished build (no stamp): ./reproduce.sh cpu --build makes it again"
            in proc.stdout)
    assert proc.stdout.strip().splitlines()[-1].startswith("ready to build: next, ./reproduce.sh cpu --build")


def _openmp(h: Host, found: str | None) -> list:
    h.facts["libgomp"] = found
    return checks_common.openmp_rows(h)


def test_libgomp_present_passes_and_a_recorded_host_without_the_fact_has_no_row():
    assert [r.verdict for r in _openmp(_host(), "libgomp.so.1")] == [PASS]
    assert checks_common.openmp_rows(_host()) == []


def test_no_libgomp_as_root_with_apt_get_waits_for_build_and_else_is_one_line():
    (row,) = _openmp(_host(uid=0, apt_get="/usr/bin/apt-get"), None)
    assert row.verdict == NEXT and row.ok() and "--build installs libgomp1" in row.note
    (row,) = _openmp(_host(), None)   # a user: only root can install it
    assert row.verdict == FAIL
    assert render.failures([row], "reproduce.sh") == [
        "reproduce.sh: this host has no libgomp.so.1, so every MindSpore cell would fail: as root, apt-get install "
        "libgomp1 (Debian/Ubuntu), or add --container to run in the CPU image"]
    made = {"python": "/x/.venv/bin/python", "stamp": True, "stamp_ok": True}   # --build is not asked for again
    (row,) = _openmp(_host(uid=0, apt_get="/usr/bin/apt-get", venv=made), None)
    assert row.verdict == FAIL
