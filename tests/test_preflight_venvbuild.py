"""harness/preflight/venvbuild.py, the native CPU build `./reproduce.sh cpu` leaves to the base Python 3.11: in process,
with what it runs planted (the base's version, venv and OpenMP probes, apt-get, dnf, `-m venv`, pip, the disk figures)
and recorded, root or not. tests/test_script_failures.py walks the same paths end to end through reproduce.sh with
stand-ins on PATH."""

import os
import subprocess
import sys

import pytest

from harness.host import allocator
from harness.preflight import buildplan, checks_allocator, checks_common, venvbuild
from tests.conftest import REPO

BASE = "/usr/bin/python3.11"
APT = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"]


class Host:
    """What venvbuild runs, each command recorded in `ran`: the base Python's two probes answer `venv` and `gomp`
    (True once apt-get installed their package, where `installs` says so); each tool exits 0 unless named in `fails`
    (`apt-get update` always does, as on a host whose sources answer but lack the package); `-m venv` makes its
    folder."""

    def __init__(self, *, version="3.11.2", venv=True, gomp=True, root=False, tools=("apt-get",), fails=(),
                 installs=True):
        self.version, self.venv, self.gomp, self.root = version, venv, gomp, root
        self.tools, self.fails, self.installs = tools, fails, installs
        self.ran: list[list[str]] = []

    def ok(self, cmd, **kw):
        self.ran.append(list(cmd))
        if cmd[:2] == [BASE, "-c"]:
            return self.venv if cmd[2] == venvbuild.HAS_VENV else self.gomp
        tool = "venv" if cmd[1:3] == ["-m", "venv"] else "pip" if cmd[1:3] == ["-m", "pip"] else cmd[0]
        if tool in self.fails and cmd[:2] != ["apt-get", "update"]:
            return False
        if tool == "venv":
            os.makedirs(cmd[3], exist_ok=True)
        if cmd[:len(APT)] == APT and self.installs:
            self.venv |= "python3.11-venv" in cmd
            self.gomp |= "libgomp1" in cmd
        return True


@pytest.fixture
def host(monkeypatch):
    def make(**kw):
        h = Host(**kw)
        monkeypatch.setattr(venvbuild, "ok", h.ok)
        monkeypatch.setattr(venvbuild, "base_version", lambda base: h.version)
        # the disk figures of the line after the build: 20 GB free before, 16 after; .venv 4 GB
        free = iter([20_000_000, 16_000_000])
        monkeypatch.setattr(buildplan, "free_kb", lambda path: next(free))
        monkeypatch.setattr(buildplan, "disk_kb", lambda path: 4_000_000)
        monkeypatch.setattr(venvbuild, "is_root", lambda: h.root)
        monkeypatch.setattr(venvbuild.shutil, "which", lambda name: f"/usr/bin/{name}" if name in h.tools else None)
        return h
    return make


def _prepare(capsys, tmp_path) -> tuple[int, list[str]]:
    rc = venvbuild.main(["prepare", BASE, str(tmp_path / ".venv"), str(tmp_path / "cpu.txt"), str(tmp_path)])
    return rc, capsys.readouterr().err.splitlines()


MAKING = "reproduce.sh: making {0}/.venv from {0}/cpu.txt (hash-checked; torch and mindspore are large)"
BUILT = ("reproduce.sh: built {0}/.venv in 0 min 0 s; it holds 4.1 GB; free disk at {0}: 20.5 GB before, 16.4 GB "
         "after")
INSTEAD = ("add --container to run in the CPU image (docker or podman; no host Python needed), or install Python 3.11 "
           "and set PYTHON=/path/to/python3.11")


@pytest.mark.parametrize("version, said", [
    ("3.10.12", f"{BASE} is Python 3.10.12, and the lock pins wheels for Python 3.11"),   # stock Ubuntu 22.04's
    ("3.13.5", f"{BASE} is Python 3.13.5, and the lock pins wheels for Python 3.11"),     # Debian 13's
    ("3.1.4", f"{BASE} is Python 3.1.4, and the lock pins wheels for Python 3.11"),       # not read as 3.11
    (None, f"{BASE} does not run"),
])
def test_a_base_that_is_not_the_locks_python_is_pointed_at_the_cpu_image_before_anything_runs(host, capsys, tmp_path,
                                                                                              version, said):
    """The lock's Python is host.toml's; the line is --check's for the same Python (checks_common.wrong_python)."""
    h = host(version=version)
    assert _prepare(capsys, tmp_path) == (2, [f"reproduce.sh: {said}; {INSTEAD}"])
    assert checks_common.wrong_python(BASE, version or "", "3.11") == f"{said}; {INSTEAD}"
    assert h.ran == []


def test_the_base_version_is_what_the_base_prints_and_none_where_it_does_not_run(tmp_path):
    stand_in = tmp_path / "python3"
    stand_in.write_text('#!/bin/sh\n[ "$1" = -c ] && echo 3.12.3\n')
    stand_in.chmod(0o755)
    assert venvbuild.base_version(str(stand_in)) == "3.12.3"
    assert venvbuild.base_version(sys.executable) == "{}.{}.{}".format(*sys.version_info[:3])
    assert venvbuild.base_version(str(tmp_path / "no-such-python")) is None
    stand_in.write_text("#!/bin/sh\nexit 1\n")
    assert venvbuild.base_version(str(stand_in)) is None


def test_a_base_that_can_make_a_venv_says_the_plan_and_begins(host, capsys, tmp_path):
    h = host()
    assert _prepare(capsys, tmp_path) == (0, [MAKING.format(tmp_path)])
    assert h.ran[2] == [BASE, "-m", "harness.preflight.buildplan", "cpu", "native", str(tmp_path)]


@pytest.mark.parametrize("root, tools, fails, installs, said", [
    (False, ("apt-get",), (), True, [
        f"reproduce.sh: {BASE} cannot make a venv (no ensurepip/venv module): as root, apt-get install python3.11-venv "
        "(Debian/Ubuntu), or add --container to run in the CPU image"]),
    (True, (), (), True, [   # root without apt-get: the same line
        f"reproduce.sh: {BASE} cannot make a venv (no ensurepip/venv module): as root, apt-get install python3.11-venv "
        "(Debian/Ubuntu), or add --container to run in the CPU image"]),
    (True, ("apt-get",), ("apt-get",), True, [
        f"reproduce.sh: apt-get install python3.11-venv ({BASE} cannot make a venv without it)",
        "reproduce.sh: apt-get could not install python3.11-venv (run apt-get install python3.11-venv to see why); fix "
        "apt's sources, or add --container to run in the CPU image"]),
    (True, ("apt-get",), (), False, [   # installed, and still no ensurepip: not Debian's python3.11
        f"reproduce.sh: apt-get install python3.11-venv ({BASE} cannot make a venv without it)",
        f"reproduce.sh: {BASE} cannot make a venv even with python3.11-venv installed (a Python not from Debian's "
        "package?); set PYTHON=/usr/bin/python3.11, or add --container to run in the CPU image"]),
])
def test_a_base_without_its_venv_module_is_refused_unless_root_installs_it(host, capsys, tmp_path, root, tools, fails,
                                                                           installs, said):
    h = host(venv=False, root=root, tools=tools, fails=fails, installs=installs)
    assert _prepare(capsys, tmp_path) == (2, said)
    assert not any("buildplan" in c for c in map(" ".join, h.ran)), "nothing is built after a refusal"
    if fails:   # install, then the lists (a fresh container has none), then install again
        assert [c[:2] for c in h.ran if c[0] == "apt-get"] == [APT[:2], ["apt-get", "update"], APT[:2]]


def test_root_installs_python311_venv_then_goes_on(host, capsys, tmp_path):
    h = host(venv=False, root=True)
    assert _prepare(capsys, tmp_path) == (0, [
        f"reproduce.sh: apt-get install python3.11-venv ({BASE} cannot make a venv without it)",
        MAKING.format(tmp_path)])
    assert [*APT, "python3.11-venv"] in h.ran


@pytest.mark.parametrize("root, fails, rc, said", [
    (False, (), 0, ["reproduce.sh: this host has no libgomp.so.1, which MindSpore's CPU kernels need: as root, apt-get "
                    "install libgomp1 (Debian/Ubuntu); until then its cells fail, and --check says so"]),
    (True, (), 0, ["reproduce.sh: apt-get install libgomp1 (MindSpore's CPU kernels need libgomp.so.1)"]),
    (True, ("apt-get",), 2, [
        "reproduce.sh: apt-get install libgomp1 (MindSpore's CPU kernels need libgomp.so.1)",
        "reproduce.sh: apt-get could not install libgomp1, which MindSpore's CPU kernels need (run apt-get install "
        "libgomp1 to see why); fix apt's sources, or add --container to run in the CPU image"]),
])
def test_no_libgomp_is_installed_as_root_said_as_a_user_and_ends_the_build_only_when_apt_fails(host, capsys, tmp_path,
                                                                                               root, fails, rc, said):
    host(gomp=False, root=root, fails=fails)
    assert _prepare(capsys, tmp_path) == (rc, said + ([MAKING.format(tmp_path)] if rc == 0 else []))


def _make(capsys, tmp_path) -> tuple[int, list[str]]:
    rc = venvbuild.main(["make", BASE, str(tmp_path / ".venv"), str(tmp_path / "cpu.txt"), "ab12"])
    return rc, capsys.readouterr().err.splitlines()


def test_make_makes_the_venv_again_whole_installs_the_lock_and_stamps_it_last(host, capsys, tmp_path, monkeypatch):
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "stale").touch()
    h = host()
    monkeypatch.delenv("PIP_RETRIES", raising=False)
    seen = {}
    ok = h.ok

    def record(cmd, **kw):
        seen.setdefault("venv there before -m venv", (tmp_path / ".venv").exists())
        seen["PIP_RETRIES"] = kw.get("env", {}).get("PIP_RETRIES")
        return ok(cmd, **kw)

    monkeypatch.setattr(venvbuild, "ok", record)
    assert _make(capsys, tmp_path) == (0, [BUILT.format(tmp_path)])   # as a user: no allocator is installed
    assert h.ran == [[BASE, "-m", "venv", str(tmp_path / ".venv")],
                     [str(tmp_path / ".venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--require-hashes",
                      "-r", str(tmp_path / "cpu.txt")]]
    assert seen == {"venv there before -m venv": False, "PIP_RETRIES": "1"}   # the stale one gone; one retry an index
    assert (tmp_path / ".venv" / ".requirements.sha256").read_text() == "ab12\n"


@pytest.mark.parametrize("fails, said", [
    ("venv", f"reproduce.sh: {BASE} -m venv {{0}}/.venv failed (see its message above); fix that Python's venv "
             "module, or add --container to run in the CPU image"),
    ("pip", "reproduce.sh: installing {0}/cpu.txt into {0}/.venv failed (see pip's message above); fix the network "
            "or the lock and run again"),
])
def test_a_venv_or_pip_that_fails_is_one_line_and_no_stamp(host, capsys, tmp_path, fails, said):
    host(fails=(fails,))
    assert _make(capsys, tmp_path) == (2, [said.format(tmp_path)])
    assert not (tmp_path / ".venv" / ".requirements.sha256").exists()


@pytest.mark.parametrize("tools, fails, said", [
    (("apt-get",), (), ["reproduce.sh: apt-get install libtcmalloc-minimal4 libjemalloc2 (the allocators of the "
                        "expected results)"]),
    (("apt-get",), ("apt-get",), [
        "reproduce.sh: apt-get install libtcmalloc-minimal4 libjemalloc2 (the allocators of the expected results)",
        "reproduce.sh: apt-get could not install them; the run goes on without"]),
    (("dnf",), (), ["reproduce.sh: dnf install /usr/lib64/libtcmalloc_minimal.so.4 (tcmalloc, the expected results' "
                    "allocator)"]),
    (("dnf",), ("dnf",), [
        "reproduce.sh: dnf install /usr/lib64/libtcmalloc_minimal.so.4 (tcmalloc, the expected results' allocator)",
        "reproduce.sh: dnf could not install it; the run goes on without"]),
])
def test_root_installs_the_missing_allocators_and_a_failure_never_ends_the_build(host, capsys, tmp_path, monkeypatch,
                                                                                 tools, fails, said):
    monkeypatch.setattr(allocator, "find_library", lambda name: None)
    host(root=True, tools=tools, fails=fails)
    assert _make(capsys, tmp_path) == (0, said + [BUILT.format(tmp_path)])
    assert (tmp_path / ".venv" / ".requirements.sha256").exists()


@pytest.mark.parametrize("tools, found, said", [
    (("apt-get", "dnf"), (), ("apt-get", ["libtcmalloc-minimal4", "libjemalloc2"])),
    (("apt-get",), ("tcmalloc",), ("apt-get", ["libjemalloc2"])),
    (("apt-get",), ("tcmalloc", "jemalloc"), ("apt-get", [])),
    (("dnf",), (), ("dnf", ["/usr/lib64/libtcmalloc_minimal.so.4"])),
    (("dnf",), ("tcmalloc",), ("dnf", [])),   # dnf: tcmalloc alone, the allocator PyTorch's cells prefer
    ((), (), (None, [])),
])
def test_the_allocators_root_installs_are_those_this_host_lacks_by_its_package_tool(monkeypatch, tools, found, said):
    monkeypatch.setattr(venvbuild.shutil, "which", lambda name: f"/usr/bin/{name}" if name in tools else None)
    monkeypatch.setattr(allocator, "find_library", lambda name: f"/usr/lib/{name}.so" if name in found else None)
    assert venvbuild.allocator_packages() == said
    if said[0] == "apt-get":   # the packages the preflight's install line names
        assert set(said[1]) <= set(checks_allocator.DEBIAN.values())


def test_root_is_what_id_says(monkeypatch):
    """As the script asked it, so a stand-in `id` on PATH plays root (tests/test_script_failures.py)."""
    monkeypatch.setattr(venvbuild.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, "0\n"))
    assert venvbuild.is_root()
    monkeypatch.setattr(venvbuild.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, "1000\n"))
    assert not venvbuild.is_root()


def test_it_runs_without_site_packages(tmp_path):
    """Standard library only (python -S): it runs before the .venv it makes; a wrong call is its usage, exit 2."""
    proc = subprocess.run([sys.executable, "-S", "-m", "harness.preflight.venvbuild", "prepare"], capture_output=True,
                          text=True, timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and proc.stderr.startswith("error: usage: python3 -m harness.preflight.venvbuild ")
