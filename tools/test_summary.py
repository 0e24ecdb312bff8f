#!/usr/bin/env python3
"""The test command's own record (tools/test.sh calls this at its end): which host, which Python, each tox
environment's status and wall time, the whole command's wall time and the disk it took (the lowest free space a
sampler saw on the checkout's file system, against the free space at the start), and whether the checkout was a
plain clone (nothing beside it) and CI's. Written as JSON to --out; `docs/runs/test-command.json` is one such record
committed, which README.md's `test-command` block is rendered from (harness.docs.facts.test_command).

    python3 tools/test_summary.py --out FILE --wall S --disk-start-kb K --disk-low-kb K ENV:STATUS:SECONDS ...
 Standard library only: it runs under whatever python3 made .venv-tox.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from harness.host import envinfo  # noqa: E402  (standard library only, as this script must be)


def _test_python() -> dict:
    """The interpreter tox's `test` environment runs the suite under (tox.ini: HARNESS_TEST_PYTHON, else Debian's)."""
    exe = os.environ.get("HARNESS_TEST_PYTHON", "/usr/bin/python3.11")
    try:
        version = subprocess.run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        version = ""
    return {"executable": exe, "version": version or "not found"}


def _env(arg: str) -> dict:
    name, status, secs = arg.split(":")
    return {"name": name, "status": status, "wall_s": int(secs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--wall", required=True, type=int, help="the whole command's wall time, seconds")
    p.add_argument("--disk-start-kb", type=int, default=None)
    p.add_argument("--disk-low-kb", type=int, default=None)
    p.add_argument("envs", nargs="+", help="NAME:STATUS:SECONDS per tox environment, in the order they ran")
    a = p.parse_args(argv)
    used = (a.disk_start_kb - a.disk_low_kb) if a.disk_start_kb is not None and a.disk_low_kb is not None else None
    record = {
        "command": "tools/test.sh",
        "date": datetime.date.today().isoformat(),
        "host": {"cpu": envinfo.cpu_model(), "cores": os.cpu_count(), "memory_gib": envinfo._memory_gib(),
                 "arch": platform.machine()},
        "python": _test_python(),
        # A plain clone has nothing beside it: the test command must pass without ../shared.
        "plain_clone": not (REPO.parent / "shared").exists(),
        "ci": os.environ.get("CI") == "true",
        "envs": [_env(e) for e in a.envs],
        # tools/test.sh's lanes: 3, lint and test beside main and image, and beside image-cuda; 2, lint and test
        # beside main, image and image-cuda (each env's wall time its own); 1, one environment after another
        "lanes": int(os.environ.get("TEST_LANES") or 3),
        "wall_s": a.wall,
        "disk_used_gib": round(used / 1024**2, 1) if used is not None else None,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
