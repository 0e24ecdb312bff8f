"""Is this the Python the CPU and CUDA images ship? Debian bookworm's python3: CPython 3.11.2 from /usr.
 tox's `test` environment runs this first (commands_pre), under the environment's own interpreter, so the suite runs
under the images' Python whatever python3.11 comes first on the host's PATH (a newer 3.11, e.g. pyenv's, has library
features 3.11.2 lacks: tarfile's extraction filters arrived in 3.11.4). One line either way. Under CI=true another
Python is an error (exit 2); elsewhere a warning (exit 0), so a non-Debian workstation can still run the suite
(HARNESS_TEST_PYTHON=/path/to/python3.11 tox -e test).

    python tools/check_test_python.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

WANT = (3, 11, 2)
CODENAME = "bookworm"


def os_release(path: Path = Path("/etc/os-release")) -> dict[str, str]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip().strip('"')
    except OSError:
        pass
    return out


def debian_package() -> str | None:
    """The dpkg version of the python3.11 package, where dpkg knows it."""
    if not shutil.which("dpkg-query"):
        return None
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "python3.11"], capture_output=True, text=True)
    return (r.stdout.strip() or None) if r.returncode == 0 else None


def verdict(version: tuple[int, int, int], base_prefix: str, release: dict[str, str],
            package: str | None) -> tuple[bool, str]:
    where = f"Python {'.'.join(map(str, version))} ({base_prefix}/bin/python3.11"
    where += f", {release.get('PRETTY_NAME', 'unknown OS')}"
    where += f", Debian package python3.11 {package})" if package else ")"
    ok = version == WANT and base_prefix == "/usr" and release.get("VERSION_CODENAME") == CODENAME and bool(package)
    return ok, where


def main() -> int:
    package = debian_package() if sys.base_prefix == "/usr" else None  # dpkg's python3.11 is /usr's only
    ok, where = verdict(sys.version_info[:3], sys.base_prefix, os_release(), package)
    if ok:
        print(f"check_test_python: the suite runs under {where}: the Python the CPU and CUDA images ship")
        return 0
    fix = ("run it on Debian 12 (bookworm) with /usr/bin/python3.11 (apt-get install python3.11 python3.11-venv), "
           "or point HARNESS_TEST_PYTHON at bookworm's python3.11")
    if os.environ.get("CI") == "true":
        print(f"error: the test suite must run under Debian bookworm's Python 3.11.2 (/usr/bin/python3.11), the one "
              f"the CPU and CUDA images ship; this is {where}; {fix}", file=sys.stderr)
        return 2
    print(f"check_test_python: warning: the suite runs under {where}, not the images' Debian bookworm Python 3.11.2: "
          f"a library feature newer than 3.11.2 would pass here and fail in the images; to match them, {fix}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
