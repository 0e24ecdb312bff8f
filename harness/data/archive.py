"""Extracting one folder of a tarball safely, on every Python 3.11 (stdlib only).

tarfile's extraction filters (`extractall(filter="data")`, PEP 706) exist only since Python 3.11.4; the CPU and CUDA
images run Debian bookworm's python3, 3.11.2, whose extractall() has no `filter` argument. So the members are checked
here, the same on every Python: a member whose path is absolute or has a `..` component is refused wherever it is in
the tarball; under the folder extracted, only directories and regular files are accepted (a symbolic or hard link, a
device or a FIFO is refused); what lies outside that folder is not extracted. Then, where tarfile has `data_filter`,
extractall() runs with filter="data" on top; elsewhere the checked regular files are written out one by one. Either
way the files and folders written get the mode open() and mkdir() give under the umask, not the tarball's: a folder a
root run extracted is then readable by a later user as any folder root made.
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import zlib
from pathlib import Path, PurePosixPath

from harness.data.fetch import normal_mode
from harness.errors import HarnessError


def has_data_filter() -> bool:
    return hasattr(tarfile, "data_filter")


def method() -> str:
    """How extract() writes files under this Python, for the checks to print."""
    version = ".".join(map(str, sys.version_info[:3]))
    if has_data_filter():
        return f"tarfile's data filter (Python {version})"
    return f"the member check alone (Python {version}: tarfile has no data_filter)"


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return f"of tar type {member.type!r}"


def members(tar: tarfile.TarFile, top: str, tarball: Path) -> list[tarfile.TarInfo]:
    """The regular files under top/ (one path component), each checked; HarnessError on a member that is not safe."""
    chosen = []
    for member in tar.getmembers():
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or "\\" in member.name:
            raise HarnessError(f"data: {tarball} holds the member '{member.name}', a path that leaves the folder it is "
                               f"extracted to; refusing to extract it; delete {tarball.name} and fetch it again")
        if path.parts[:1] != (top,):
            continue
        if member.isdir():
            continue
        if not member.isfile():
            raise HarnessError(f"data: {tarball} member '{member.name}' is {_kind(member)}, not a regular file; "
                               f"refusing to extract it; delete {tarball.name} and fetch it again")
        chosen.append(member)
    return chosen


def extract(tarball: Path, dest: Path, top: str) -> list[str]:
    """Extract the regular files of tarball's top/ folder into dest (which must exist); return their names."""
    tarball, dest = Path(tarball), Path(dest)
    try:
        with tarfile.open(tarball, "r:*") as tar:
            chosen = members(tar, top, tarball)
            if has_data_filter():
                tar.extractall(dest, members=chosen, filter="data")
            else:
                for member in chosen:
                    target = dest.joinpath(*PurePosixPath(member.name).parts)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    with source, open(target, "wb") as out:
                        shutil.copyfileobj(source, out)
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise HarnessError(f"data: could not read {tarball} ({e}); delete it and fetch it again") from None
    _normal_modes(dest, [PurePosixPath(m.name) for m in chosen])
    return [m.name for m in chosen]


def _normal_modes(dest: Path, names: list[PurePosixPath]) -> None:
    """Give what was extracted under dest the modes a file or folder made here gets (the tarball's may be 0600)."""
    files, folders = normal_mode(is_dir=False), normal_mode(is_dir=True)
    seen: set[Path] = set()
    for name in names:
        target = dest.joinpath(*name.parts)
        target.chmod(files)
        for parent in target.parents:
            if parent == dest or parent in seen or dest not in parent.parents:
                break
            seen.add(parent)
            parent.chmod(folders)
