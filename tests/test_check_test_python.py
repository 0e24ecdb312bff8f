"""tools/check_test_python.py: the suite runs under the images' Python (Debian bookworm's 3.11.2), and says so."""

import configparser
import subprocess
import sys

import pytest

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "tools"))
try:
    import check_test_python as ctp
finally:
    sys.path.remove(str(REPO / "tools"))

BOOKWORM = {"PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "VERSION_CODENAME": "bookworm"}


@pytest.mark.parametrize("version, prefix, release, package, ok", [
    ((3, 11, 2), "/usr", BOOKWORM, "3.11.2-6+deb12u6", True),
    ((3, 11, 7), "/root/.pyenv/versions/3.11.7", BOOKWORM, None, False),       # pyenv's, first on PATH here
    ((3, 11, 15), "/usr/local/python3.11.15", {"VERSION_CODENAME": "jammy"}, None, False),  # the Ascend image's
    ((3, 11, 2), "/usr", {"VERSION_CODENAME": "trixie"}, "3.11.2-1", False),
    ((3, 11, 2), "/opt/python", BOOKWORM, None, False),                        # a 3.11.2 that is not Debian's
])
def test_only_bookworms_3_11_2_passes(version, prefix, release, package, ok):
    got, where = ctp.verdict(version, prefix, release, package)
    assert got is ok and ".".join(map(str, version)) in where and prefix in where


def _run(ci):
    env = {"PATH": "/usr/bin:/bin", **({"CI": "true"} if ci else {})}
    return subprocess.run([sys.executable, str(REPO / "tools" / "check_test_python.py")], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("ci", [False, True])
def test_one_line_and_an_error_only_under_ci(ci):
    r = _run(ci)
    ok, _ = ctp.verdict(sys.version_info[:3], sys.base_prefix, ctp.os_release(),
                        ctp.debian_package() if sys.base_prefix == "/usr" else None)
    out = r.stdout + r.stderr
    assert out.count("\n") == 1
    if ok:
        assert r.returncode == 0 and "the Python the CPU and CUDA images ship" in r.stdout
    elif ci:
        assert r.returncode == 2 and r.stderr.startswith("error: the test suite must run under Debian bookworm's")
    else:
        assert r.returncode == 0 and "warning" in r.stderr


def test_tox_runs_the_suite_under_debians_python_3_11():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    env = tox["testenv:test"]
    assert env["basepython"].strip() == "{env:HARNESS_TEST_PYTHON:/usr/bin/python3.11}"
    assert "tools/check_test_python.py" in env["commands_pre"]
