"""`python3 -m harness.preflight.buildplan PLATFORM native|container PATH`: the line `./reproduce.sh PLATFORM --build`
prints before it builds: what it downloads, the disk it needs (against what is free at PATH, where it writes) and how
long it took where it was measured, from host.toml's [build.*] tables. Standard library only: it runs under the
host's python3 before any .venv exists.

After the build, the line of what it took (`built`: its time, what it holds, the free disk before and after, measured
by `disk_kb` and `free_kb`), which harness/preflight/venvbuild.py says after .venv and harness/preflight/shell.py
(`build`, then `built`) around an image. The figures are for the reader only: a size or a free space that cannot be
read is "unknown", never the build's failure.
"""

from __future__ import annotations

import os
import subprocess
import sys

from harness.preflight import data

WHAT = {"native": ".venv from requirements/cpu.txt", "container": "the image of Dockerfile.{platform}"}


def plan(platform: str, mode: str, path: str, hostdata: dict) -> str:
    key = "cpu-native" if (platform, mode) == ("cpu", "native") else platform
    b = hostdata["build"][key]
    disk = hostdata["disk"][platform]
    need = disk["native_gb"] if key == "cpu-native" else disk["build_gb"]
    kb = free_kb(path)
    free = "its free space unreadable" if kb is None else f"{gb(kb)} free there now"
    return (f"reproduce.sh: --build makes {WHAT[mode].format(platform=platform)}: downloads {b['download']}; "
            f"needs {need} GB free at {path} ({free}); takes {b['time']}")


def free_kb(path: str) -> int | None:
    """The KB free to a user at `path` (df's Available), None where the file system does not say."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize // 1024


def disk_kb(path: str) -> int | None:
    """The KB `path` holds on disk, as `du -sk` counts them (each hard-linked file once), None where it is not there
    or du does not say."""
    if not os.path.lexists(path):
        return None
    try:
        out = subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=False).stdout.split()
    except OSError:
        return None
    return int(out[0]) if out and out[0].isdigit() else None


def gb(kb: int | None) -> str:
    return "unknown" if kb is None else f"{kb * 1024 / 1e9:.1f} GB"


def built(what: str, seconds: float, kb: int | None, path: str, free_before: int | None,
          free_after: int | None) -> str:
    """The line after a build: its time, the KB it holds, the KB free at `path` before and after it."""
    s = max(0, int(seconds))
    return (f"reproduce.sh: built {what} in {s // 60} min {s % 60} s; it holds {gb(kb)}; free disk at {path}: "
            f"{gb(free_before)} before, {gb(free_after)} after")


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("cpu", "cuda", "ascend") or argv[1] not in WHAT:
        print("error: usage: python3 -m harness.preflight.buildplan cpu|cuda|ascend native|container PATH",
              file=sys.stderr)
        return 2
    try:
        hostdata = data.host()
    except (data.DataError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(plan(argv[0], argv[1], argv[2], hostdata))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
