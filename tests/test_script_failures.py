"""How the scripts fail: every exit that is not a success is one line saying what failed and what to do; a refusal is
exit 2, a failure the script did not foresee exit 3 with the line and command where it happened, never a silent end
by `set -e`. Each test plants the trigger with stand-ins on PATH (a python3.11 without ensurepip, an apt-get that
fails, a free space that cannot be read, an engine that cannot start its container, a report that fails); nothing here
needs root or a network, and a test that depends on the user's id sets it with a stand-in `id`."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import checkout_without_venv as _checkout_without_venv
from tests.helpers import engine_calls as calls
from tests.helpers import one_line_error, processes_with
from tests.helpers import path_without_engines as _path_without_engines

SCRIPT = REPO / "reproduce.sh"
NATIVE = REPO / "tools" / "reproduce" / "native.sh"
# Tools the native build and the stand-ins below use besides _path_without_engines' list.
MORE_TOOLS = ("rm", "cp", "chmod", "touch", "ls", "tail", "tr", "sort", "wc", "find", "xargs", "mktemp", "env", "tee",
              "sleep")


def _tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)
    return path


def _path(tmp_path: Path, *fakes: Path) -> str:
    """The stand-ins' folder first, then the system tools the scripts use (no docker, podman, apt-get or Python)."""
    sysbin = Path(_path_without_engines(tmp_path, python3=False))
    for tool in MORE_TOOLS:
        found = shutil.which(tool)
        if found and not (sysbin / tool).exists():
            (sysbin / tool).symlink_to(found)
    return ":".join([str(tmp_path / "fake"), str(sysbin)])


def _as_uid(tmp_path: Path, uid: int) -> None:
    """An `id` answering `id -u` with `uid` (the suite runs as root in CI, as a user elsewhere)."""
    _tool(tmp_path / "fake", "id", f'case "$1" in -u|-g) echo {uid} ;; *) echo "uid={uid}" ;; esac')


def _python311(tmp_path: Path, *, ensurepip: bool = True, venv_fails: bool = False, report_rc: int = 0,
               run_rc: int = 0, libgomp: bool = True) -> Path:
    """A python3.11 stand-in: `-m venv DIR` makes DIR/bin/python, itself a stand-in whose `-m pip` succeeds and whose
    `-m harness run/report` exit with run_rc/report_rc. `import ensurepip, venv` fails unless `ensurepip` or the
    file ensurepip-installed exists (the apt-get stand-in makes it, as installing python3.11-venv would); likewise
    ctypes finds libgomp.so.1 where `libgomp` or libgomp-installed (apt-get install libgomp1). What the script asks
    harness/preflight/shell.py, and the build it leaves to harness/preflight/venvbuild.py, this interpreter runs (which
    asks the stand-in itself, by its path, what it can import, and makes the venv with it)."""
    fake = tmp_path / "fake"
    marker = tmp_path / "ensurepip-installed"
    gomp = tmp_path / "libgomp-installed"
    venv_python = _tool(tmp_path / "venvbin", "python", f"""
case "$1 $2 $3" in
  "-m harness run"*) exit {run_rc} ;;
  "-m harness report"*) [ {report_rc} = 0 ] || {{ echo "Traceback: the report stand-in failed" >&2; exit {report_rc}; }}
                        echo "$4/report/report.html" ;;
esac
exit 0""")
    return _tool(fake, "python3.11", f"""
case "$1" in
  -c) case "$2" in
        *ensurepip*) [ {int(ensurepip)} = 1 ] || [ -e {marker} ] || exit 1 ;;
        *find_library*) [ {int(libgomp)} = 1 ] || [ -e {gomp} ] || exit 1 ;;
        *%d.%d.%d*) echo 3.11.2 ;;
        *version_info*) echo 3.11 ;;
      esac ;;
  -m) case "$2" in
        harness.preflight.shell|harness.preflight.venvbuild) exec '{os.path.realpath(sys.executable)}' "$@" ;;
      esac
      if [ "$2" = venv ]; then
        [ {int(venv_fails)} = 0 ] || {{ echo "Error: Command '-m ensurepip' returned exit status 1." >&2; exit 1; }}
        mkdir -p "$3/bin" && cp {venv_python} "$3/bin/python"
      fi ;;
esac
exit 0""")


def _apt_get(tmp_path: Path, *, fails: bool = False) -> Path:
    """An apt-get stand-in that logs each call to apt.log; installing python3.11-venv makes ensurepip importable."""
    log, marker, gomp = tmp_path / "apt.log", tmp_path / "ensurepip-installed", tmp_path / "libgomp-installed"
    return _tool(tmp_path / "fake", "apt-get", f"""echo "$*" >> {log}
[ "$1" != update ] || exit 0
[ {int(fails)} = 0 ] || {{ echo "E: Unable to locate package $*" >&2; exit 100; }}
case " $* " in *" python3.11-venv "*) touch {marker} ;; esac
case " $* " in *" libgomp1 "*) touch {gomp} ;; esac
exit 0""")


def _reproduce(tmp_path: Path, *args, path: str, env: dict | None = None, script: Path | None = None):
    return subprocess.run(["bash", str(script or SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={"PATH": path, "HOME": str(tmp_path), **(env or {})})


def _line_of(text: str, script: Path = SCRIPT) -> int:
    return next(n for n, line in enumerate(script.read_text().splitlines(), 1) if text in line)


# --- native cpu: the base Python, its venv module, the allocators, the disk figures ---------------------------


def test_a_python_311_without_venv_is_one_line_for_a_user(tmp_path):
    """Debian's python3.11 without python3.11-venv: `-m venv` would leave a .venv without pip."""
    clone = _checkout_without_venv(tmp_path)
    py = _python311(tmp_path, ensurepip=False)
    _as_uid(tmp_path, 1000)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"reproduce.sh: {py} cannot make a venv (no ensurepip/venv module): as root, apt-get install python3.11-venv "
        "(Debian/Ubuntu), or add --container to run in the CPU image")
    assert not (clone / ".venv").exists()


def test_as_root_python311_venv_is_installed_before_the_venv_is_made(tmp_path):
    clone = _checkout_without_venv(tmp_path)
    py = _python311(tmp_path, ensurepip=False)
    _as_uid(tmp_path, 0)
    _apt_get(tmp_path)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"reproduce.sh: apt-get install python3.11-venv ({py} cannot make a venv without it)"
    assert "install -y -qq --no-install-recommends python3.11-venv" in (tmp_path / "apt.log").read_text()
    assert (clone / ".venv" / ".requirements.sha256").exists()


def test_as_root_an_apt_get_that_cannot_install_python311_venv_is_one_line_after_its_command(tmp_path):
    clone = _checkout_without_venv(tmp_path)
    py = _python311(tmp_path, ensurepip=False)
    _as_uid(tmp_path, 0)
    _apt_get(tmp_path, fails=True)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"reproduce.sh: apt-get install python3.11-venv ({py} cannot make a venv without it)",
        "reproduce.sh: apt-get could not install python3.11-venv (run apt-get install python3.11-venv to see why); "
        "fix apt's sources, or add --container to run in the CPU image"]
    # install, then the lists (a fresh container has none), then install again
    assert [c.split()[0] for c in (tmp_path / "apt.log").read_text().splitlines()] == ["install", "update", "install"]


def test_as_root_libgomp1_is_installed_and_as_a_user_its_absence_is_one_line_before_the_build_goes_on(tmp_path):
    """MindSpore's CPU kernels link libgomp.so.1, which a minimal Debian lacks (the images install libgomp1)."""
    clone = _checkout_without_venv(tmp_path)
    _python311(tmp_path, libgomp=False)
    _as_uid(tmp_path, 0)
    _apt_get(tmp_path)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 0, proc.stderr
    assert "reproduce.sh: apt-get install libgomp1 (MindSpore's CPU kernels need libgomp.so.1)" in proc.stderr
    assert "install -y -qq --no-install-recommends libgomp1" in (tmp_path / "apt.log").read_text()

    (tmp_path / "libgomp-installed").unlink()
    _as_uid(tmp_path, 1000)   # a user: said once, and the build goes on (the check names it again)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if "libgomp.so.1" in ln]
    assert said == ["reproduce.sh: this host has no libgomp.so.1, which MindSpore's CPU kernels need: as root, apt-get "
                    "install libgomp1 (Debian/Ubuntu); until then its cells fail, and --check says so"]
    assert (clone / ".venv" / ".requirements.sha256").exists()


def test_as_root_an_apt_get_that_cannot_install_libgomp1_is_one_line(tmp_path):
    clone = _checkout_without_venv(tmp_path)
    _python311(tmp_path, libgomp=False)
    _as_uid(tmp_path, 0)
    _apt_get(tmp_path, fails=True)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "reproduce.sh: apt-get could not install libgomp1, which MindSpore's CPU kernels need (run apt-get install "
        "libgomp1 to see why); fix apt's sources, or add --container to run in the CPU image")


def test_a_failing_venv_module_is_one_line(tmp_path):
    clone = _checkout_without_venv(tmp_path)
    py = _python311(tmp_path, venv_fails=True)
    _as_uid(tmp_path, 1000)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        f"reproduce.sh: {py} -m venv {clone}/.venv failed (see its message above); fix that Python's venv module, or "
        "add --container to run in the CPU image")
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("reproduce.sh: ")][-2].startswith(
        "reproduce.sh: making ")


def _without_allocators(tmp_path: Path) -> dict:
    """The environment of a host where harness/host/allocator.py finds neither tcmalloc nor jemalloc (a sitecustomize
    that empties the folders it searches, as harness.preflight.shell reads them)."""
    shim = tmp_path / "no-allocators"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text("import harness.host.allocator\nharness.host.allocator.SEARCH = ()\n")
    return {"PYTHONPATH": str(shim)}


@pytest.mark.parametrize("apt_fails", [False, True])
def test_a_missing_allocator_is_installed_or_said_and_never_ends_the_build(tmp_path, apt_fails):
    """Root with apt-get, tcmalloc and jemalloc absent: the build goes on either way."""
    clone = _checkout_without_venv(tmp_path)
    _python311(tmp_path)
    _as_uid(tmp_path, 0)
    _apt_get(tmp_path, fails=apt_fails)
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh",
                      env=_without_allocators(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    said = "reproduce.sh: apt-get install libtcmalloc-minimal4 libjemalloc2 (the allocators of the expected results)"
    assert said in lines
    assert ("reproduce.sh: apt-get could not install them; the run goes on without" in lines) == apt_fails
    assert lines[-1] == ("reproduce.sh: next: ./reproduce.sh cpu --check (the training steps, seconds), then "
                         "./reproduce.sh cpu to run the quick profile")


def test_a_free_space_that_cannot_be_read_leaves_the_disk_figures_unknown(tmp_path):
    """A file system that does not say its free space (statvfs fails: a sitecustomize plants it in the Python that
    measures, harness/preflight/buildplan.py under venvbuild): the figures are unknown, the build goes on."""
    clone = _checkout_without_venv(tmp_path)
    _python311(tmp_path)
    _as_uid(tmp_path, 1000)
    shim = tmp_path / "no-statvfs"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import os\n\n\ndef statvfs(path):\n    raise OSError(5, 'unreadable')"
                                           "\n\n\nos.statvfs = statvfs\n")
    proc = _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh",
                      env={"PYTHONPATH": str(shim)})
    assert proc.returncode == 0, proc.stderr
    built = [ln for ln in proc.stderr.splitlines() if ln.startswith("reproduce.sh: built ")]
    assert len(built) == 1 and re.fullmatch(
        rf"reproduce\.sh: built {re.escape(str(clone))}/\.venv in 0 min \d+ s; it holds 0\.0 GB; free disk at "
        rf"{re.escape(str(clone))}: unknown before, unknown after", built[0]), built


@pytest.mark.parametrize("run_rc", [0, 1])
def test_a_native_report_that_fails_keeps_the_runs_status_and_says_so(tmp_path, run_rc):
    clone = _checkout_without_venv(tmp_path)
    _python311(tmp_path, report_rc=1, run_rc=run_rc)
    _as_uid(tmp_path, 1000)
    out = tmp_path / "o"
    assert _reproduce(tmp_path, "cpu", "--build", path=_path(tmp_path), script=clone / "reproduce.sh").returncode == 0
    proc = _reproduce(tmp_path, "cpu", "--out", out, "--synthetic", path=_path(tmp_path), script=clone / "reproduce.sh")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "Traceback: the report stand-in failed",
        f"reproduce.sh: the run in {out} finished (exit {run_rc}), but rendering its report failed (exit 1; its output "
        f"is above); render it again with: {clone}/.venv/bin/python -m harness report {out}"]
    assert "report:" not in proc.stdout


# --- the container engine's own failures, the report's, the data mirror ---------------------------------------


def _engine(tmp_path: Path, fail: dict[str, int]) -> None:
    """A docker stand-in whose fetch, run or report container exits with the status `fail` gives it (125: the engine
    could not start it; other codes: the harness inside failed), printing what docker prints; every call logged."""
    log = tmp_path / "calls.log"
    cases = "\n".join(f"    *\" {image} {what} \"*) rc={rc} ;;" for what, rc in fail.items()
                      for image in ("example/harness:1",))
    _tool(tmp_path / "fake", "docker", f"""{{ printf '%s\\t' "$@"; printf '\\n'; }} >> {log}
case "$1" in
  run) rc=0
    case " $* " in
{cases}
    esac
    case "$rc" in
      0) exit 0 ;;
      12[5-7]) echo "docker: Error response from daemon: error while creating mount source path: denied." >&2 ;;
      2) echo "error: the harness's own one line" >&2 ;;
      *) echo "Traceback (most recent call last): the harness stand-in failed" >&2 ;;
    esac
    exit "$rc" ;;
esac
exit 0""")


@pytest.mark.parametrize("what, rc", [("fetch", 125), ("run", 126), ("report", 127), ("run", 125)])
def test_the_engines_own_failure_is_one_line_naming_the_engine(tmp_path, what, rc):
    _engine(tmp_path, {what: rc})
    out, data = tmp_path / "o", tmp_path / "d"
    proc = _reproduce(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", out, "--data-dir",
                      data, path=_path(tmp_path))
    assert proc.returncode == 2
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("reproduce.sh:")]
    assert ours == [proc.stderr.splitlines()[-1]] == [
        f"reproduce.sh: docker could not run the {what} container (exit {rc}: the engine's own failure, not the "
        f"harness's; its message is above): check the mounts ({out}, {data}: they exist and are yours), subuid and "
        "subgid for a rootless user, the SELinux label of those folders, and that example/harness:1 is this "
        "harness's image"]
    ran = [c for c in calls(tmp_path) if c[0] == "run"]
    assert len(ran) == {"fetch": 1, "run": 2, "report": 3}[what], "nothing runs after the engine's failure"


@pytest.mark.parametrize("run_rc", [0, 1])
def test_a_container_report_that_fails_keeps_the_runs_status_and_says_so(tmp_path, run_rc):
    _engine(tmp_path, {"run": run_rc, "report": 1})
    out = tmp_path / "o"
    proc = _reproduce(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", out, "--synthetic",
                      path=_path(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"reproduce.sh: the run in {out} finished (exit {run_rc}), but rendering its report failed (exit 1; its output "
        f"is above); render it again with: docker run --rm --shm-size 2g -e HARNESS_IMAGE=example/harness:1 --user "
        f"{os.getuid()}:{os.getgid()} -v {out}:/results example/harness:1 report /results")


def test_a_fetch_that_fails_is_one_line_and_no_run(tmp_path):
    _engine(tmp_path, {"fetch": 1})
    proc = _reproduce(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", tmp_path / "o",
                      "--data-dir", tmp_path / "d", path=_path(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "reproduce.sh: fetching the datasets in example/harness:1 failed (exit 1; its output is above), so the run did "
        "not start; run it again, or pass --synthetic to run on generated data")
    assert len([c for c in calls(tmp_path) if c[0] == "run"]) == 1


def test_the_harness_refusing_the_fetch_is_its_own_line(tmp_path):
    _engine(tmp_path, {"fetch": 2})
    proc = _reproduce(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", tmp_path / "o",
                      "--data-dir", tmp_path / "d", path=_path(tmp_path))
    assert proc.returncode == 2 and one_line_error(proc) == "error: the harness's own one line"


def test_the_data_mirror_reaches_the_fetch_container_and_the_usage(tmp_path):
    _engine(tmp_path, {})
    proc = _reproduce(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--dry-run", "--out",
                      tmp_path / "o", path=_path(tmp_path), env={"HARNESS_DATA_MIRROR": "https://mirror.example/data"})
    assert proc.returncode == 0, proc.stderr
    fetch = next(ln for ln in proc.stdout.splitlines() if " fetch " in ln)
    assert " -e HARNESS_DATA_MIRROR=https://mirror.example/data " in fetch
    assert "HARNESS_DATA_MIRROR" not in proc.stdout.replace(fetch, "")
    plain = _reproduce(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--dry-run", "--out",
                       tmp_path / "o", path=_path(tmp_path))
    assert "HARNESS_DATA_MIRROR" not in plain.stdout
    help_text = " ".join(_reproduce(tmp_path, "--help", path=_path(tmp_path)).stderr.split())
    assert "HARNESS_DATA_MIRROR (a base URL the datasets are downloaded from" in help_text
    assert "3 an unexpected failure of this script" in help_text


# --- a failure nothing foresaw: exit 3 and where -------------------------------------------------------------


def test_an_unexpected_failure_is_exit_3_with_the_line_and_command(tmp_path):
    """A sha256sum that fails mid-way (the lock's hash): set -e alone would end the script here in silence."""
    _tool(tmp_path / "fake", "sha256sum", "exit 1")
    out = tmp_path / "o"
    proc = _reproduce(tmp_path, "cpu", "--dry-run", "--out", out, path=_path(tmp_path))
    assert proc.returncode == 3
    n = _line_of('want="$(sha256sum "$lock"', NATIVE)   # a line of the file reproduce.sh sources: named with it
    assert one_line_error(proc) == (
        f"reproduce.sh: unexpected failure at line {n} of tools/reproduce/native.sh: "
        f"want=\"$(sha256sum \"$lock\" | cut -d' ' -f1)\" (exit 1); "
        f"report it, with the command line (./reproduce.sh cpu --dry-run --out {out}) and the output above")


# --- tools/ ---------------------------------------------------------------------------------------------------


def _tools_clone(tmp_path: Path, *names: str) -> Path:
    clone = tmp_path / "clone"
    (clone / "tools").mkdir(parents=True, exist_ok=True)
    (clone / "requirements").mkdir(exist_ok=True)
    for name in (*names, "unexpected.sh"):
        shutil.copy(REPO / "tools" / name, clone / "tools" / name)
    shutil.copy(REPO / "requirements" / "cpu.txt", clone / "requirements" / "cpu.txt")
    return clone


def _run_tool(tmp_path: Path, clone: Path, name: str, *args, path: str, env: dict | None = None):
    return subprocess.run(["bash", str(clone / "tools" / name), *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=clone, env={"PATH": path, "HOME": str(tmp_path), **(env or {})})


def test_wheelhouse_a_pip_log_of_warnings_alone_still_ends_in_its_line(tmp_path):
    """`grep -v WARNING log | tail` under pipefail: a log of nothing but warnings made grep's exit 1 end the script
    before its line."""
    clone = _tools_clone(tmp_path, "wheelhouse.sh")
    py = _tool(tmp_path / "fake", "pip-python", 'echo "WARNING: Retrying (Retry(total=0)) after connection broken"; '
               "exit 1")
    proc = _run_tool(tmp_path, clone, "wheelhouse.sh", "cpu", "--python", py, path=_path(tmp_path))
    assert proc.returncode == 2
    out = clone / "wheelhouse" / "cpu"
    assert proc.stderr.splitlines()[-1] == (
        f"wheelhouse.sh: pip could not fetch every wheel of {clone}/requirements/cpu.txt for {os.uname().machine} "
        f"(log: {out}/.pip-download-{os.uname().machine}.log); on an air-gapped host copy a wheelhouse made elsewhere")


def test_wheelhouse_a_du_that_fails_leaves_its_figure_unknown(tmp_path):
    clone = _tools_clone(tmp_path, "wheelhouse.sh")
    py = _tool(tmp_path / "fake", "pip-python", 'for a; do [ "$p" = -d ] && touch "$a/x-1.0-py3-none-any.whl"; p=$a; '
               "done; exit 0")
    _tool(tmp_path / "fake", "du", "exit 1")
    proc = _run_tool(tmp_path, clone, "wheelhouse.sh", "cpu", "--python", py, path=_path(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == f"wheelhouse.sh: 1 wheels, ? in {clone}/wheelhouse/cpu"


def test_wheelhouse_an_unexpected_failure_is_exit_3(tmp_path):
    clone = _tools_clone(tmp_path, "wheelhouse.sh")
    _tool(tmp_path / "fake", "sha256sum", "exit 1")
    proc = _run_tool(tmp_path, clone, "wheelhouse.sh", "cpu", path=_path(tmp_path))
    assert proc.returncode == 3
    n = _line_of('want="$(cat "${files[@]}"', REPO / "tools" / "wheelhouse.sh")
    assert one_line_error(proc) == (
        f"wheelhouse.sh: unexpected failure at line {n}: want=\"$(cat \"${{files[@]}}\" | sha256sum | cut -d' ' -f1) "
        "${arches[*]}\" (exit 1); report it, with the command line and the output above")


def test_apex_sources_check_of_trees_not_fetched_is_one_line(tmp_path):
    clone = _tools_clone(tmp_path, "apex_sources.sh")
    proc = _run_tool(tmp_path, clone, "apex_sources.sh", "check", path=_path(tmp_path))
    assert proc.returncode == 2
    assert one_line_error(proc) == (f"apex_sources.sh: {clone}/third_party/apex/nvidia-apex is missing; make it with: "
                                    "tools/apex_sources.sh fetch")


def test_apex_sources_an_unexpected_failure_is_exit_3(tmp_path):
    clone = _tools_clone(tmp_path, "apex_sources.sh")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "f").write_text("x")
    _tool(tmp_path / "fake", "sort", "exit 1")
    proc = _run_tool(tmp_path, clone, "apex_sources.sh", "digest", tmp_path / "tree", path=_path(tmp_path))
    assert proc.returncode == 3
    n = _line_of('(cd "$1" && find', REPO / "tools" / "apex_sources.sh")
    assert one_line_error(proc).startswith(f"apex_sources.sh: unexpected failure at line {n}: ")


def test_test_sh_without_a_python_that_makes_a_venv_is_one_line(tmp_path):
    """Ubuntu's python3 (3.10, 3.12) without python3-venv, and no python3.11: tools/test.sh names the package."""
    clone = _tools_clone(tmp_path, "test.sh", "install_system_packages.sh")
    _as_uid(tmp_path, 1000)  # install_system_packages.sh only says what is missing
    for name in ("python3", "python3.11"):
        _tool(tmp_path / "fake", name, 'case "$*" in *ensurepip*) exit 1 ;; esac; exit 0')
    proc = _run_tool(tmp_path, clone, "test.sh", path=_path(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "tools/test.sh: no python3 here can make a venv (no ensurepip/venv module): as root, apt-get install "
        "python3-venv python3.11-venv (Debian/Ubuntu), then run tools/test.sh again")
    assert not (clone / ".venv-tox").exists()


def test_install_system_packages_installs_what_it_can_and_names_the_rest_in_one_line(tmp_path):
    """One name apt-get does not know (chromium, say) used to abort the whole install with apt's E: line."""
    clone = _tools_clone(tmp_path, "install_system_packages.sh")
    _as_uid(tmp_path, 0)
    log = tmp_path / "apt.log"
    _tool(tmp_path / "fake", "apt-get", f"""echo "$*" >> {log}
case " $* " in *" chromium "*) echo "E: Unable to locate package chromium" >&2; exit 100 ;; esac
exit 0""")
    _tool(tmp_path / "fake", "uname", "echo no-such-arch")
    proc = _run_tool(tmp_path, clone, "install_system_packages.sh", path=_path(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("install_system_packages.sh: apt-get install ")
    assert lines[1] == (
        "install_system_packages.sh: apt-get could not install chromium (apt-get install chromium says why: not in "
        "this release's lists, or a conflict); the rest is installed, and the tests that need these skip (fail under "
        "CI=true)")
    installed = [ln.split()[-1] for ln in log.read_text().splitlines() if ln.count(" ") == 4]
    assert "buildah" in installed and "libjemalloc2" in installed and "chromium" in installed


def test_test_sh_an_unexpected_failure_is_exit_3(tmp_path):
    """tox's environments are stand-ins; a `date` that fails (the first thing the command times)."""
    clone = _tools_clone(tmp_path, "test.sh", "install_system_packages.sh")
    _as_uid(tmp_path, 1000)
    tox = _tool(tmp_path / "toxbin", "tox", "exit 0")
    _tool(tmp_path / "fake", "python3", f"""case "$*" in
  *ensurepip*) exit 0 ;;
  "-m venv "*) mkdir -p "$3/bin" && cp {tox} "$3/bin/tox" && cp {tox} "$3/bin/pip" ;;
esac""")
    _tool(tmp_path / "fake", "date", "exit 1")
    proc = _run_tool(tmp_path, clone, "test.sh", path=_path(tmp_path))
    assert proc.returncode == 3
    n = _line_of("t_start=$(date +%s)", REPO / "tools" / "test.sh")
    assert proc.stderr.splitlines()[-1] == (
        f"tools/test.sh: unexpected failure at line {n}: t_start=$(date +%s) (exit 1); report it, with the output "
        "above")


def test_test_sh_with_less_free_disk_than_the_published_run_needed_is_one_line_before_anything(tmp_path):
    """A CI host short of disk failed half an hour in, on buildah's "no space left on device": the whole command now
    compares the free disk with the published run's peak first; a part of it (-e) is not refused."""
    import json

    clone = _tools_clone(tmp_path, "test.sh", "install_system_packages.sh")
    record = clone / "docs" / "runs" / "fresh-host" / "test-command.json"
    record.parent.mkdir(parents=True)
    shutil.copy(REPO / "docs" / "runs" / "fresh-host" / "test-command.json", record)
    need = json.loads(record.read_text())["disk_used_gib"]
    _as_uid(tmp_path, 1000)
    tox = _tool(tmp_path / "toxbin", "tox", "exit 0")
    _tool(tmp_path / "fake", "python3", f"""case "$*" in
  *ensurepip*) exit 0 ;;
  "-m venv "*) mkdir -p "$3/bin" && cp {tox} "$3/bin/tox" && cp {tox} "$3/bin/pip" ;;
esac""")
    free_kb = int((need - 0.2) * 1024**2)
    _tool(tmp_path / "fake", "df", f'echo "Filesystem 1024-blocks Used Available Capacity Mounted on"; '
                                   f'echo "/dev/vda 263174212 1 {free_kb} 1% /"')
    proc = _run_tool(tmp_path, clone, "test.sh", path=_path(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert one_line_error(proc) == (
        f"tools/test.sh: {free_kb / 1024**2:.1f} GiB free on the disk of {clone}, and the five environments took up to "
        f"{need} GiB of it at once in the published run (docs/runs/fresh-host/test-command.json); free some disk "
        "there, or run a part of them, e.g. tools/test.sh -e lint,test")
    assert not (clone / ".venv-tox").exists()   # refused before anything was installed or made
    proc = _run_tool(tmp_path, clone, "test.sh", "-e", "lint", path=_path(tmp_path))
    assert proc.returncode == 0, proc.stderr
    # `exec tox` drops the EXIT trap; its disk sampler, a subshell with the same command line, once outlived it
    assert processes_with(f"{clone}/tools/test.sh") == []


@pytest.mark.parametrize("lanes", ["3", "2", "1"])
def test_test_sh_records_each_environment_its_time_and_disk_and_names_a_failure(tmp_path, lanes):
    """The whole run's record (.tox/logs/test-command.json), which README's time and disk for the command come from:
    each tox environment (stand-ins here, `image` failing) with its status, the host, and a plain clone said so; in
    three lanes (main and image, and image-cuda, beside lint and test: the default), two (TEST_LANES=2: main, image and
    image-cuda beside lint and test) or, TEST_LANES=1, one after another."""
    import json
    import sys

    clone = _tools_clone(tmp_path, "test.sh", "install_system_packages.sh", "test_summary.py")
    shutil.copytree(REPO / "harness", clone / "harness", ignore=shutil.ignore_patterns("__pycache__"))  # envinfo
    _as_uid(tmp_path, 1000)
    tox = _tool(tmp_path / "toxbin", "tox", 'case "$*" in *image) echo "image broke" >&2; exit 1 ;; esac; exit 0')
    _tool(tmp_path / "fake", "python3", f"""case "$*" in
  *ensurepip*) exit 0 ;;
  "-m venv "*) mkdir -p "$3/bin" && cp {tox} "$3/bin/tox" && cp {tox} "$3/bin/pip" ;;
  tools/test_summary.py*) exec {sys.executable} "$@" ;;
esac""")
    proc = _run_tool(tmp_path, clone, "test.sh", path=_path(tmp_path), env={"TEST_LANES": lanes})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-1] == "tools/test.sh: FAILED: image"
    assert "--- image failed; its last 40 lines (all of them in .tox/logs/image.log):\nimage broke\n" in proc.stdout
    assert ("tools/test.sh: image ended: FAILED after " in proc.stdout) == (lanes != "1")
    record = json.loads((clone / ".tox" / "logs" / "test-command.json").read_text())
    assert record["lanes"] == int(lanes)
    assert [(e["name"], e["status"]) for e in record["envs"]] == [
        ("lint", "OK"), ("test", "OK"), ("main", "OK"), ("image", "FAILED"), ("image-cuda", "OK")]
    assert record["plain_clone"] is True   # nothing named shared/ beside this clone
    assert record["wall_s"] >= 0 and record["disk_used_gib"] is not None and record["host"]["cores"] >= 1


# --- tools/ctr_run.sh: a container start the kernel refused for a moment, tried again ---------------------------

MEMFD = "Close_Fd sealing memfd copy: Device or resource busy"


@pytest.mark.parametrize("fails, says, rc, starts", [
    (1, MEMFD, 0, 2),                          # refused once: started again, and the command ran
    (5, MEMFD, 1, 3),                          # refused every time: three starts, then buildah's failure is the answer
    (1, "Error: no container with name or ID", 1, 1),   # any other failure is the command's: never run again
])
def test_ctr_run_starts_again_only_a_container_whose_sealed_binary_copy_was_refused(tmp_path, fails, says, rc,
                                                                                       starts):
    """check_image's buildah run (tools/ctr_run.sh) under a stand-in buildah that fails its first FAILS starts with
    SAYS, as buildah 1.28 did once under the test command's load, and otherwise prints its arguments."""
    count = tmp_path / "starts"
    fake = tmp_path / "buildah"
    fake.write_text(f'#!/bin/bash\nn=$(( $(cat {count} 2> /dev/null || echo 0) + 1 )); echo "$n" > {count}\n'
                    f'if [ "$n" -le {fails} ]; then echo "{says}" >&2; echo "Error: exit status 1" >&2; exit 1; fi\n'
                    'echo "args: $*"\n')
    fake.chmod(0o755)
    script = (f'set -Eeuo pipefail; . {REPO}/tools/ctr_run.sh; buildah=({fake} --root S); ctr=ctr0; '
              'ctr_run --user 7 -- id -u')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, proc.stderr
    assert int(count.read_text()) == starts
    retried = [line for line in proc.stderr.splitlines() if line.startswith("check_image: buildah could not start")]
    assert len(retried) == (starts - 1)
    if rc == 0:
        assert proc.stdout == "args: --root S run --isolation chroot --user 7 ctr0 -- id -u\n"
    else:
        assert says in proc.stderr and proc.stdout == ""
