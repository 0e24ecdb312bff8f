"""Faults a long run meets outside its cells, each turned into one line (`error: ...`, exit code 2) that names the
file and the fix:

- the disk fills (ENOSPC, or a quota: EDQUOT),
- the run folder turns read-only (EROFS: a file system remounted read-only after an error) or loses write
  permission (EACCES/EPERM), or is removed (ENOENT),
- the data folder vanishes (deleted, or its mount gone) between cells,
- the report folder cannot be written.

Nothing measured is lost: results are written atomically (harness.results.store.write_atomic), a result that could not
be written leaves no file, so its cell is not recorded as done, and `--resume` runs it again once the fault is fixed.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from harness.errors import HarnessError

# What a file system said, in words; errors with other numbers are not file-system faults of the run folder.
WHY = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
       errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
       errno.EPERM: "operation not permitted", errno.ENOENT: "its folder no longer exists",
       errno.EIO: "input/output error"}
FULL = (errno.ENOSPC, errno.EDQUOT)  # reported by write(), fsync() or close(), often without a file name


def _inside(name: str | bytes | None, folder: Path) -> bool:
    if not name:
        return False
    path = Path(os.fsdecode(name)).absolute()
    return path == folder.absolute() or folder.absolute() in path.parents


def storage(e: BaseException, folder: Path) -> bool:
    """True for a write into `folder` that failed for the file system's reasons, not a cell's or the user's."""
    if not isinstance(e, OSError) or e.errno not in WHY:
        return False
    return (e.errno in FULL and not e.filename) or _inside(e.filename, folder) or _inside(e.filename2, folder)


def _fix(e: OSError, folder: Path) -> str:
    if e.errno in FULL:
        return f"free space on the file system of {folder} (df -h {folder})"
    if e.errno == errno.EROFS:
        return f"make {folder} writable again (remount it read-write)"
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"give this user write access to {folder} (ls -ld {folder})"
    if e.errno == errno.ENOENT:
        return f"restore {folder} (or its mount)"
    return f"check the disk holding {folder} (dmesg)"


def _what(e: OSError, folder: Path) -> str:
    return os.fsdecode(e.filename) if e.filename else str(folder)


def run_folder(e: OSError, out: Path) -> HarnessError:
    """The one line for a write into the run folder that failed."""
    return HarnessError(f"cannot write {_what(e, out)}: {WHY[e.errno]}; {_fix(e, out)}, then continue with "
                        f"--resume (finished cells are kept; a cell whose result was not written runs again)")


def report_folder(e: OSError, out: Path) -> HarnessError:
    """The one line for a write into the report folder that failed; the run folders are only read."""
    return HarnessError(f"cannot write the report to {_what(e, out)}: {WHY[e.errno]}; {_fix(e, out)}, or choose "
                        f"another report folder with --out (the run folders are unchanged)")


def unwritable(folder: Path) -> str | None:
    """Why an existing folder cannot be written, or None when it can."""
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return WHY[errno.EROFS] if read_only else WHY[errno.EACCES]


def require_data(dataset: str, folder: str) -> None:
    """Between cells: a data folder that was deleted or unmounted since the run started stops the run, instead of
    failing every later cell that reads it."""
    path = Path(folder)
    try:
        present = path.is_dir() and any(path.iterdir())
    except OSError:
        present = False
    if not present:
        raise HarnessError(f"the {dataset} data folder {folder} is gone or empty since the run started; restore it "
                           f"(copy it back or mount it again), then continue with --resume (finished cells are kept)")
