"""`python3 -m harness.preflight.venvbuild prepare|make BASE VENV LOCK CHECKOUT|SHA256`: what `./reproduce.sh cpu`
does to make .venv, natively, with BASE (the Python the script found: $PYTHON, else python3.11, else python3).
Standard library only, any python3 from 3.8 on: it runs before the .venv it makes. The script runs `prepare` under
BASE where BASE can run it, else under the host's python3 (so that a BASE that does not run is said here), and `make`
under BASE, which `prepare` found to be the lock's Python.

    prepare  BASE itself: that it runs and is the lock's Python (host.toml's [python] version; else the line of
             --check's failing Python row, checks_common.wrong_python); its venv module (Debian and Ubuntu ship venv
             and ensurepip apart, in python3.11-venv) and the OpenMP runtime MindSpore's CPU kernels link
             (libgomp.so.1, Debian's libgomp1): installed where this may (root, apt-get), else one line says who
             can (a venv module missing ends it); then the build plan (the disk it needs at CHECKOUT) and the line
             that the build begins.
    make     VENV made again whole from LOCK: BASE -m venv, the allocators of the expected results (root with apt-get
             or dnf; never fatal), pip install --require-hashes, and last the stamp (SHA256, the lock's), which
             marks the build finished (the check calls a .venv without it an interrupted build); then what it took
             (harness.preflight.buildplan.built: its time, what VENV holds, the free disk at its folder before and
             after).

BASE is probed as a program of its own (`BASE -c ...`), so a stand-in can play it. Lines for the user go to stderr,
each prefixed `reproduce.sh: `; exit 2: refused, its last line saying why and what to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

PROG = "reproduce.sh"
CONTAINER = "add --container to run in the CPU image"
HAS_VENV = "import ensurepip, venv"
VERSION = 'import sys; print("%d.%d.%d" % sys.version_info[:3])'
HAS_GOMP = 'import ctypes.util, sys; sys.exit(ctypes.util.find_library("gomp") is None)'
QUIET = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


class Refused(Exception):
    """A refusal: its one line (the script's name is put before it)."""


def say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def ok(cmd: list[str], **kw) -> bool:
    """Whether `cmd` ran and exited 0 (a program that is not there: False)."""
    try:
        return subprocess.run(cmd, check=False, **kw).returncode == 0
    except OSError:
        return False


def is_root() -> bool:
    """Whether this runs as root, as `id -u` says (the script asked it so)."""
    try:
        return subprocess.run(["id", "-u"], capture_output=True, text=True, check=False).stdout.strip() == "0"
    except OSError:
        return False


def can_install() -> bool:
    """Root with apt-get: what may install a missing Debian package here."""
    return is_root() and shutil.which("apt-get") is not None


def apt_install(*packages: str) -> bool:
    """As root: a host whose package lists were never fetched (a fresh container) gets them first."""
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return ok(cmd, env=env, **QUIET) or (ok(["apt-get", "update", "-qq"], **QUIET) and ok(cmd, env=env, **QUIET))


def allocator_packages() -> tuple[str | None, list[str]]:
    """(tool, packages) for the allocators the expected results were measured with that this host lacks: apt-get and
    their Debian packages (checks_allocator.DEBIAN); dnf and tcmalloc's library file, the allocator PyTorch's cells
    prefer (dnf installs whichever package provides it, under any of Fedora's and RHEL's names)."""
    from harness.host import allocator
    from harness.preflight.checks_allocator import DEBIAN

    missing = [name for name in DEBIAN if not allocator.find_library(name)]
    tool = next((t for t in ("apt-get", "dnf") if shutil.which(t)), None)
    if tool == "apt-get":
        return tool, [DEBIAN[name] for name in missing]
    return tool, ["/usr/lib64/" + allocator.LIBRARIES["tcmalloc"][0]] if tool and "tcmalloc" in missing else []


def base_version(base: str) -> str | None:
    """BASE's version, "3.11.2", as BASE itself prints it (and --check's row names it); None where it does not
    run."""
    try:
        p = subprocess.run([base, "-c", VERSION], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def prepare(base: str, venv: str, lock: str, here: str) -> None:
    # Stock Ubuntu 22.04 and 24.04 have Python 3.10 and 3.12, Debian 13 3.13: the line points at the CPU image, which
    # needs no host Python.
    from harness.preflight import data
    from harness.preflight.checks_common import is_locks_python, wrong_python

    want, got = data.host()["python"]["version"], base_version(base)
    if not got or not is_locks_python(got, want):
        raise Refused(wrong_python(base, got or "", want))
    if not ok([base, "-c", HAS_VENV], **QUIET):   # without them `-m venv` leaves a .venv with no pip
        if not can_install():
            raise Refused(f"{base} cannot make a venv (no ensurepip/venv module): as root, apt-get install "
                          f"python3.11-venv (Debian/Ubuntu), or {CONTAINER}")
        say(f"apt-get install python3.11-venv ({base} cannot make a venv without it)")
        if not apt_install("python3.11-venv"):
            raise Refused("apt-get could not install python3.11-venv (run apt-get install python3.11-venv to see why); "
                          f"fix apt's sources, or {CONTAINER}")
        if not ok([base, "-c", HAS_VENV], **QUIET):
            raise Refused(f"{base} cannot make a venv even with python3.11-venv installed (a Python not from Debian's "
                          f"package?); set PYTHON=/usr/bin/python3.11, or {CONTAINER}")
    # PyTorch's wheel carries its own OpenMP runtime, MindSpore's does not: without it every MindSpore cell fails.
    if not ok([base, "-c", HAS_GOMP], **QUIET):
        if not can_install():
            say("this host has no libgomp.so.1, which MindSpore's CPU kernels need: as root, apt-get install libgomp1 "
                "(Debian/Ubuntu); until then its cells fail, and --check says so")
        else:
            say("apt-get install libgomp1 (MindSpore's CPU kernels need libgomp.so.1)")
            if not apt_install("libgomp1"):
                raise Refused("apt-get could not install libgomp1, which MindSpore's CPU kernels need (run apt-get "
                              f"install libgomp1 to see why); fix apt's sources, or {CONTAINER}")
    # The build plan (harness.preflight.buildplan), as BASE prints it; for the reader only, never the build's failure.
    ok([base, "-m", "harness.preflight.buildplan", "cpu", "native", here], cwd=here, stdout=sys.stderr,
       stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": here})
    say(f"making {venv} from {lock} (hash-checked; torch and mindspore are large)")


def make(base: str, venv: str, lock: str, sha256: str) -> None:
    from harness.preflight import buildplan

    here = os.path.dirname(venv)   # the checkout: the free disk there before and after
    began, free_before = time.time(), buildplan.free_kb(here)
    # A stale or half-made .venv is made again whole; the stamp, written last, marks it finished.
    if os.path.islink(venv) or os.path.isfile(venv):
        os.unlink(venv)
    elif os.path.exists(venv):
        shutil.rmtree(venv)
    if not ok([base, "-m", "venv", venv]):
        raise Refused(f"{base} -m venv {venv} failed (see its message above); fix that Python's venv module, or "
                      f"{CONTAINER}")
    # The allocators the expected results were measured with (harness/host/allocator.py preloads them when present):
    # installed where this may; otherwise the line before the run says what differs. Never fatal.
    tool, packages = None, []
    if is_root():
        try:
            tool, packages = allocator_packages()
        except (ImportError, OSError, ValueError):   # what is missing unknown: the run's own line says it
            pass
    if tool == "apt-get" and packages:
        say(f"apt-get install {' '.join(packages)} (the allocators of the expected results)")
        if not apt_install(*packages):
            say("apt-get could not install them; the run goes on without")
    elif tool == "dnf" and packages:
        say(f"dnf install {' '.join(packages)} (tcmalloc, the expected results' allocator)")
        if not ok(["dnf", "install", "-y", "-q", *packages], **QUIET):
            say("dnf could not install it; the run goes on without")
    # One retry per index: the lock names the PyTorch CPU index, which an air-gapped host cannot reach. pip's own
    # progress bars on a terminal (minutes of downloads); quiet in CI logs.
    quiet = ["--progress-bar", "on"] if sys.stderr.isatty() else ["--quiet"]
    python = os.path.join(venv, "bin", "python")
    if not ok([python, "-m", "pip", "install", *quiet, "--require-hashes", "-r", lock],
              env={**os.environ, "PIP_RETRIES": os.environ.get("PIP_RETRIES") or "1"}):
        raise Refused(f"installing {lock} into {venv} failed (see pip's message above); fix the network or the lock "
                      "and run again")
    with open(os.path.join(venv, ".requirements.sha256"), "w") as f:
        f.write(sha256 + "\n")
    print(buildplan.built(venv, time.time() - began, buildplan.disk_kb(venv), here, free_before,
                          buildplan.free_kb(here)), file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    step, args = (argv[0], argv[1:]) if argv else ("", [])
    if (step, len(args)) not in (("prepare", 4), ("make", 4)):
        print("error: usage: python3 -m harness.preflight.venvbuild prepare BASE VENV LOCK CHECKOUT | make BASE "
              "VENV LOCK SHA256", file=sys.stderr)
        return 2
    try:
        if step == "prepare":
            prepare(*args)
        else:
            make(*args)
    except Refused as e:
        say(str(e))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
