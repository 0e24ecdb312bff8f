"""sha256 verification and verified downloads (stdlib only)."""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

from harness.errors import HarnessError
from harness.progress import Download


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, expected: str) -> None:
    found = sha256_file(path)
    if found != expected:
        raise HarnessError(f"data: {path} has the wrong sha256 (expected {expected}, found {found}); "
                           f"delete it and fetch it again")


def download(url: str, dest: Path, expected: str, dataset: str = "", timeout_s: float = 60.0) -> None:
    """Download to a temporary file beside dest, check its hash, then move it into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310
            length = resp.headers.get("Content-Length")
            shown = Download(dest.name, int(length) if length and length.isdigit() else None)
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                out.write(chunk)
                shown.update(len(chunk))
            shown.close()
        found = sha256_file(Path(tmp))
        if found != expected:
            raise HarnessError(f"data: download of {url} has the wrong sha256 (expected {expected}, "
                               f"found {found}); the mirror may have changed, fetch {dest.name} by hand")
        os.replace(tmp, dest)
    except OSError as e:
        instead = f", or run without it: --synthetic {dataset}" if dataset else ""
        raise HarnessError(f"data: could not download {url} ({e}); put {dest.name} in {dest.parent} "
                           f"by hand or pass --data-dir{instead}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
