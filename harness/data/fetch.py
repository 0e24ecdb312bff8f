"""sha256 verification, verified downloads, a data mirror, and the one-line errors of a data folder (stdlib only: it
runs before any framework, and in a bare Python, so it imports nothing outside the standard library and harness.errors).
 Downloads: each file goes to a `.NAME.XXXXXXXX.part` file beside its destination, created with the mode open() gives
(0o666 less the umask: a file another user can read when the umask lets them, unlike mkstemp's 0600), is checked
against its pinned sha256 and only then renamed into place; on any failure, a Ctrl-C included, the part file is
removed, so a data folder holds verified files and nothing else.

A mirror: HARNESS_DATA_MIRROR=URL (http://, https:// or file://) serves a copy of a data folder; each pinned file is
fetched from `URL/<dataset folder>/<file name>` (the layout `python -m harness fetch --data-dir D` leaves in D, so
`python3 -m http.server` run inside D is a mirror) instead of its upstream address, and checked against the same pin.
 A data folder this user cannot read or write (one a root run made, a read-only mount) is one line naming the folder
and the fix (data_folder_error), never a traceback.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import pwd
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from harness.errors import HarnessError

MIRROR_ENV = "HARNESS_DATA_MIRROR"
MIRROR_SCHEMES = ("http", "https", "file")
PROGRESS_EVERY_S = 5.0  # not a terminal: a progress line at most this often (CI logs stay short)

# Every file this module downloaded in this process, as (destination, source URL): `harness fetch` says where its
# data came from.
FETCHED: list[tuple[Path, str]] = []


class NotOnMirror(HarnessError):
    """The mirror has no such file (HTTP 404, or no such file under a file:// mirror): a dataset that accepts another
    layout (imdb) tries that one."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, expected: str) -> None:
    path = Path(path)
    try:
        found = sha256_file(path)
    except OSError as e:
        raise data_folder_error(e, path.parent.parent, path) from None
    if found != expected:
        raise HarnessError(f"data: {path} has the wrong sha256 (expected {expected}, found {found}); "
                           f"delete it and fetch it again")


def mirror() -> str | None:
    """HARNESS_DATA_MIRROR without its trailing slash, or None when unset; a URL of another scheme is refused."""
    url = os.environ.get(MIRROR_ENV, "").strip()
    if not url:
        return None
    if urllib.parse.urlsplit(url).scheme.lower() not in MIRROR_SCHEMES:
        raise HarnessError(f"{MIRROR_ENV}={url} is not an http://, https:// or file:// URL; set it to the URL that "
                           f"serves a copy of a data folder (e.g. http://HOST:8000 for `python3 -m http.server` run "
                           f"inside it), or unset it to download from the upstream sources")
    return url.rstrip("/")


def source(url: str | None, dest: Path) -> str:
    """Where dest is fetched from: the mirror's `<dataset folder>/<file name>` when a mirror is set, else url (None:
    a file that only a mirror serves)."""
    base = mirror()
    if base is None:
        if url is None:
            raise HarnessError(f"data: {dest} has no upstream address; set {MIRROR_ENV} to a mirror that serves it")
        return url
    dest = Path(dest)
    return f"{base}/{urllib.parse.quote(dest.parent.name)}/{urllib.parse.quote(dest.name)}"


def umask() -> int:
    """This process's umask, read without changing it where Linux says it (/proc: os.umask would set it for a moment,
    under every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def normal_mode(is_dir: bool) -> int:
    """The mode open() (0o666) or mkdir() (0o777) gives under this umask."""
    return (0o777 if is_dir else 0o666) & ~umask()


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _existing(path: Path) -> tuple[Path, os.stat_result | None]:
    """The path itself, or its nearest ancestor, that this user can stat: the one that refused (a folder without
    write permission for a file to be created in it, one without search permission for what lies below)."""
    path = Path(os.path.abspath(path))
    for p in (path, *path.parents):
        try:
            return p, p.lstat()
        except OSError:
            continue
    return path, None


def _inside(path: Path, folder: Path) -> bool:
    path, folder = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return path == folder or folder in path.parents


def data_folder_error(e: OSError, data_dir: Path, path: Path | None = None) -> HarnessError:
    """The one line for an OSError reading or writing the data folder data_dir (path: what was being read or written
    when the error has no file name): the folder or file that refused, why, and the fix."""
    data_dir = Path(data_dir)
    named = Path(os.fsdecode(e.filename)) if e.filename else Path(path or data_dir)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        where = named.parent if not named.is_dir() else named
        return HarnessError(f"data: no space left to write {named} ({os.strerror(e.errno)}): free space there "
                            f"(df -h {where}) or pass --data-dir FOLDER on another disk")
    if e.errno == errno.EROFS:
        return HarnessError(f"data: {named} is on a read-only file system: pass --data-dir FOLDER on a writable disk, "
                            f"or fill {data_dir} where it is writable (`python -m harness fetch --data-dir "
                            f"{data_dir}`) and mount it read-only only then")
    if e.errno not in (errno.EACCES, errno.EPERM):
        return HarnessError(f"data: {named}: {e.strerror or e}; check {data_dir} (ls -l), or pass --data-dir "
                            f"FOLDER you own")
    blame, st = _existing(named)
    me_uid = os.geteuid()
    me = _user(me_uid)
    how = "readable" if not os.access(blame, os.R_OK | (os.X_OK if blame.is_dir() else 0)) else "writable"
    if st is not None and st.st_uid != me_uid:
        owner = _user(st.st_uid)
        if _inside(blame, data_dir):
            fix = f"have {owner} run `chown -R {me} {data_dir}`"
        else:  # an ancestor of a data folder that does not exist yet
            fix = f"have {owner} run `mkdir -p {data_dir} && chown {me} {data_dir}`"
        return HarnessError(f"data: {blame} is owned by {owner} and not {how} by you ({me}): pass --data-dir FOLDER "
                            f"you own, or {fix}")
    mode = f"mode {st.st_mode & 0o7777:04o}" if st is not None else "permission denied"
    return HarnessError(f"data: {blame} is not {how} by you ({me}, {mode}): run `chmod -R u+rwX {data_dir}`, or "
                        f"pass --data-dir FOLDER you own")


class _Progress:
    """Bytes so far of the total: one line rewritten in place on a terminal, else a plain line every few seconds."""

    def __init__(self, name: str, total: int | None, stream=None):
        self.name, self.total, self.stream = name, total, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.got, self.last = 0, time.monotonic()

    def update(self, n: int) -> None:
        self.got += n
        if self.tty or time.monotonic() - self.last >= PROGRESS_EVERY_S:
            self.last = time.monotonic()
            self._show("\r" if self.tty else "\n")

    def close(self) -> None:
        self._show("\n")

    def _show(self, end: str) -> None:
        of = f" of {self.total / 1e6:,.1f} MB ({100 * self.got / self.total:.0f}%)" if self.total else " MB"
        print(f"downloading {self.name}: {self.got / 1e6:,.1f}{of}", end=end, file=self.stream, flush=True)


def _part(dest: Path) -> tuple[int, Path]:
    """A new part file beside dest, opened for writing, with the mode open() would give (not mkstemp's 0600)."""
    for _ in range(100):
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.part")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free part-file name", str(dest))


class _Network(Exception):
    """A failure of the transfer itself (refused, reset, timed out, HTTP error), not of the data folder."""


def _copy(url: str, out, name: str, timeout_s: float) -> None:
    try:
        resp = urllib.request.urlopen(url, timeout=timeout_s)  # noqa: S310 - the scheme is checked (mirror())
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise _Network(e) from None
    with resp:
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        shown = _Progress(name, total)
        while True:
            try:
                chunk = resp.read(1 << 20)
            except (OSError, http.client.HTTPException) as e:
                raise _Network(e) from None
            if not chunk:
                break
            out.write(chunk)  # an OSError here is the data folder's (a full disk), not the network's
            shown.update(len(chunk))
        shown.close()
        # http.client returns what it got when the server closes early: a short file is the transfer's fault, said
        # as such, not as a wrong sha256.
        if total is not None and shown.got != total:
            raise _Network(f"the connection closed after {shown.got} of {total} bytes")


def _missing(e: object) -> bool:
    reason = getattr(e, "reason", None)
    return getattr(e, "code", None) == 404 or isinstance(reason, FileNotFoundError) or isinstance(e, FileNotFoundError)


def download(url: str | None, dest: Path, expected: str, dataset: str = "", timeout_s: float = 60.0,
             data_dir: Path | None = None) -> None:
    """Download url (or its copy on the mirror; url None: the mirror only) to a part file beside dest, check its sha256,
    then move it into place. data_dir: the --data-dir dest lies in (default: dest's folder's parent, the harness's
    layout)."""
    dest = Path(dest)
    data_dir = Path(data_dir) if data_dir is not None else dest.parent.parent
    src = source(url, dest)
    on_mirror = src != url
    instead = f", or run without it: --synthetic {dataset}" if dataset else ""
    tmp: Path | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)  # 0o777 less the umask, as any folder a user makes
        fd, tmp = _part(dest)
        with os.fdopen(fd, "wb") as out:
            _copy(src, out, dest.name, timeout_s)
            out.flush()
            os.fsync(out.fileno())  # on disk before the rename: a crash leaves no renamed, empty file
        found = sha256_file(tmp)
        if found != expected:
            if on_mirror:
                raise HarnessError(f"data: {dest.name} from the mirror {src} has the wrong sha256 (expected "
                                   f"{expected}, found {found}); nothing was written to {dest.parent}: replace "
                                   f"{dest.parent.name}/{dest.name} on the mirror with a verified copy (`python -m "
                                   f"harness fetch` on a connected machine makes one), or unset {MIRROR_ENV}"
                                   + (f" to download from {url}" if url else ""))
            raise HarnessError(f"data: download of {url} has the wrong sha256 (expected {expected}, found {found}); "
                               f"the upstream file may have changed, fetch {dest.name} by hand into {dest.parent}")
        os.replace(tmp, dest)
        FETCHED.append((dest, src))
    except _Network as e:
        why = e.args[0] if e.args else e
        if on_mirror:
            if _missing(why):
                raise NotOnMirror(f"data: the mirror has no {dest.parent.name}/{dest.name} ({src}: {why}); serve a "
                                  f"data folder that holds it ({MIRROR_ENV} names the folder above "
                                  f"{dest.parent.name}/), or unset {MIRROR_ENV}{instead}") from None
            raise HarnessError(f"data: could not download {dest.name} from the mirror {src} ({why}); check that "
                               f"{MIRROR_ENV} serves a data folder, or unset it to download from the upstream "
                               f"sources{instead}") from None
        raise HarnessError(f"data: could not download {url} ({why}); put {dest.name} in {dest.parent} by hand or "
                           f"pass --data-dir{instead}") from None
    except OSError as e:
        raise data_folder_error(e, data_dir, dest) from None
    finally:
        if tmp is not None:
            try:
                tmp.unlink()
            except FileNotFoundError:  # renamed into place
                pass
            except OSError:  # the folder turned unwritable meanwhile: the error said above names it
                pass
