"""`python3 -m harness.preflight.buildplan PLATFORM native|container PATH`: the line `./reproduce.sh PLATFORM --build`
prints before it builds: what it downloads, the disk it needs (against what is free at PATH, where it writes) and how
long it took where it was measured, from host.toml's [build.*] tables. Standard library only: it runs under the
host's python3 before any .venv exists. reproduce.sh measures the build itself and prints that after.
"""

from __future__ import annotations

import os
import sys

from harness.preflight import data

WHAT = {"native": ".venv from requirements/cpu.txt", "container": "the image of Dockerfile.{platform}"}


def plan(platform: str, mode: str, path: str, hostdata: dict) -> str:
    key = "cpu-native" if (platform, mode) == ("cpu", "native") else platform
    b = hostdata["build"][key]
    disk = hostdata["disk"][platform]
    need = disk["native_gb"] if key == "cpu-native" else disk["build_gb"]
    try:
        st = os.statvfs(path)
        free = f"{st.f_bavail * st.f_frsize / 1e9:.1f} GB free there now"
    except OSError:
        free = "its free space unreadable"
    return (f"reproduce.sh: --build makes {WHAT[mode].format(platform=platform)}: downloads {b['download']}; "
            f"needs {need} GB free at {path} ({free}); takes {b['time']}")


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
