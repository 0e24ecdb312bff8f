#!/usr/bin/env python3
"""Which GPU architectures a CUDA shared library carries code for, read from its ELF .nv_fatbin section.

    python3 tools/fatbin_archs.py LIB.so [LIB.so ...]      one line each: "LIB: sass sm_70 sm_80 ... ptx sm_86"
 No CUDA toolkit (cuobjdump) and no GPU needed: readelf (binutils) finds the section, and the fat binary's
own headers (magic 0xBA55ED50; per entry: kind 1 = PTX, 2 = SASS (ELF cubin), and the sm version) are read
from it. SASS for an architecture runs as it is; a GPU with only PTX of an older one gets its code JIT-compiled
by the driver on first use (CUDA_CACHE_PATH keeps the result). tools/check_cuda_image.sh runs it in the image.
"""

from __future__ import annotations

import mmap
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "sass"}


def section(path: str, name: str = ".nv_fatbin") -> tuple[int, int] | None:
    """(file offset, size) of an ELF section, from readelf's section table."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if name in fields:
            i = fields.index(name)
            return int(fields[i + 3], 16), int(fields[i + 4], 16)
    return None


def archs(path: str) -> dict[str, set[int]]:
    """{"sass": {70, 80, ...}, "ptx": {...}} for one library; empty sets when it has no fat binary."""
    found: dict[str, set[int]] = {"sass": set(), "ptx": set()}
    where = section(path)
    if where is None:
        return found
    start, size = where
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        pos, end_all = start, start + size
        while pos + 16 <= end_all:
            magic, _version, header, payload = struct.unpack_from("<IHHQ", data, pos)
            if magic != MAGIC:  # fat binaries are 8-byte aligned and may be padded apart
                pos += 8
                continue
            entry, end = pos + header, pos + header + payload
            while entry + 32 <= end:
                kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", data, entry)
                sm = struct.unpack_from("<I", data, entry + 28)[0]
                if kind in KINDS and entry_header:
                    found[KINDS[kind]].add(sm)
                if not entry_header:
                    break
                entry += entry_header + entry_size
            pos = end
    return found


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for path in paths:
        got = archs(path)
        print(f"{path}: " + " ".join(f"{kind} " + " ".join(f"sm_{sm}" for sm in sorted(got[kind]))
                                     for kind in ("sass", "ptx") if got[kind]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
