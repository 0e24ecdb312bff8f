"""The data download walked for real: a real HTTP server on 127.0.0.1 serves a data folder (HARNESS_DATA_MIRROR), and
`python -m harness fetch` fetches from it in a subprocess, as a user runs it.

The served files are harness/data/fixtures.py's, in each dataset's real format; their sha256 are not the pins of
harness/data/<dataset>.py, so the subprocess is started through WRAPPER, which replaces those pins with the fixtures'
before it calls harness.cli's main. That override lives here only.

Three walks, each checking the exit code and the one line it prints: (a) a clean fetch (every file verified, mode 0644
under umask 022, the data reads back); (b) a file corrupted on the mirror (exit 2, one line naming the file and both
sha256, nothing half-written left, the good files kept); (c) a data folder a root run made, then fetched into by an
unprivileged user (everything present: reads only, passes; a file missing: one line naming the folder and the fix).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from harness import cli
from harness import data as datasets
from harness.data import cifar10, cora, fetch, fixtures, imdb, multi30k
from harness.errors import HarnessError
from tests.helpers import REPO

ONLY = "model/resnet50/*,model/gcn/*,model/gru/*"   # cifar10 (one tarball), cora and multi30k (files one by one)
NOBODY = 65534
WRAPPER = """
import importlib, json, sys
from harness.cli import main
for name, pins in json.loads(sys.argv[1]).items():
    mod = importlib.import_module(f"harness.data.{name}")
    mod.FILES = {**mod.FILES, **pins}
sys.exit(main(sys.argv[2:]))
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output is the harness's, not the server's access log
        pass


@pytest.fixture
def serve():
    """serve(folder) -> the URL of a ThreadingHTTPServer serving folder; stopped after the test."""
    servers = []

    def start(folder: Path, handler=None) -> str:
        handler = handler or functools.partial(_Quiet, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def mirror(tmp_path, serve):
    """A data folder of fixtures, served: (URL, folder, {dataset: pins}, {dataset: expected})."""
    folder = tmp_path / "mirror"
    rng = np.random.RandomState(0)
    made = {"cifar10": fixtures.cifar10(folder / cifar10.FOLDER, rng, n=20),
            "cora": fixtures.cora(folder / cora.FOLDER, rng),
            "multi30k": fixtures.multi30k(folder / multi30k.FOLDER, rng, {"train": 40, "val": 8, "test": 8})}
    return serve(folder), folder, {k: f.pins for k, f in made.items()}, {k: f.expected for k, f in made.items()}


def _fetch(url: str, pins: dict, data_dir: Path, user: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env |= {"PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", fetch.MIRROR_ENV: url}
    who = {} if user is None else {"user": user, "group": user, "extra_groups": []}
    return subprocess.run([sys.executable, "-c", WRAPPER, json.dumps(pins), "fetch", "--profile", "quick", "--only",
                           ONLY, "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=env, umask=0o022, **who)


def _said(proc: subprocess.CompletedProcess) -> list[str]:
    """The lines the harness says (not the download progress)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if not line.startswith("downloading ")]


def _tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o7777 for p in sorted(folder.rglob("*"))}


def test_a_clean_fetch_verifies_every_file_with_normal_modes_and_the_data_reads_back(mirror, tmp_path):
    url, served, pins, expected = mirror
    data_dir = tmp_path / "data"
    proc = _fetch(url, pins, data_dir)
    assert proc.returncode == 0, proc.stderr
    came = f"downloaded from the mirror {url}"
    assert _said(proc) == [f"data: cifar10: verified in {data_dir / 'cifar10'} (1 {came})",
                           f"data: cora: verified in {data_dir / 'cora_planetoid'} (8 {came})",
                           f"data: multi30k: verified in {data_dir / 'multi30k_task1'} (6 {came})"]
    tree = _tree(data_dir)
    files = [*(f"cifar10/{n}" for n in cifar10.FILES), *(f"cora_planetoid/{n}" for n in cora.FILES),
             *(f"multi30k_task1/{n}" for n in multi30k.FILES)]
    assert tree == {"cifar10": 0o755, "cora_planetoid": 0o755, "multi30k_task1": 0o755} | dict.fromkeys(files, 0o644)
    for name in files:
        assert (data_dir / name).read_bytes() == (served / name).read_bytes()

    old = os.umask(0o022)
    try:
        images = cifar10.load(data_dir / "cifar10")   # extracts beside the tarball, with the same normal modes
    finally:
        os.umask(old)
    np.testing.assert_array_equal(images["train_x"], expected["cifar10"]["train_x"])
    np.testing.assert_array_equal(images["test_y"], expected["cifar10"]["test_y"])
    assert set(_tree(data_dir / "cifar10").values()) == {0o644, 0o755}
    graph = cora.load(data_dir / "cora_planetoid")
    np.testing.assert_array_equal(graph["labels"], expected["cora"]["labels"])
    assert multi30k.load(data_dir / "multi30k_task1")["val"] == expected["multi30k"]["val"]

    again = _fetch(url, pins, data_dir)   # all present: verified, nothing downloaded
    assert again.returncode == 0 and "downloading" not in again.stderr
    assert _said(again)[0] == f"data: cifar10: verified in {data_dir / 'cifar10'}"


def test_b_a_file_corrupted_on_the_mirror_is_one_line_and_nothing_unverified_is_left(mirror, tmp_path):
    url, served, pins, _ = mirror
    bad = served / cora.FOLDER / "ind.cora.graph"
    bad.write_bytes(bad.read_bytes() + b"x")
    found = hashlib.sha256(bad.read_bytes()).hexdigest()
    data_dir = tmp_path / "data"
    proc = _fetch(url, pins, data_dir)
    assert proc.returncode == 2
    assert _said(proc) == [
        f"error: data: ind.cora.graph from the mirror {url}/cora_planetoid/ind.cora.graph has the wrong sha256 "
        f"(expected {pins['cora']['ind.cora.graph']}, found {found}); nothing was written to "
        f"{data_dir / 'cora_planetoid'}: replace cora_planetoid/ind.cora.graph on the mirror with a verified copy "
        f"(`python -m harness fetch` on a connected machine makes one), or unset HARNESS_DATA_MIRROR to download from "
        f"{cora.URLS['ind.cora.graph']}"]
    kept = sorted(p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*") if p.is_file())
    before = list(cora.FILES)[:list(cora.FILES).index("ind.cora.graph")]   # fetched in FILES' order, cifar10 first
    assert kept == sorted([f"cifar10/{cifar10.TARBALL}", *(f"cora_planetoid/{n}" for n in before)])
    for name in kept:
        assert (data_dir / name).read_bytes() == (served / name).read_bytes()


def _as_nobody_fails() -> str | None:
    """Why an unprivileged user cannot run this interpreter and checkout (a Python under root's 0700 home), or None."""
    try:
        probe = subprocess.run([sys.executable, "-c", "import harness.cli"], capture_output=True, text=True,
                               timeout=120, cwd="/", user=NOBODY, group=NOBODY, extra_groups=[],
                               env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"})
    except OSError as e:
        return f"uid {NOBODY} cannot start {sys.executable}: {e.strerror}"
    return None if probe.returncode == 0 else f"uid {NOBODY} cannot import the harness: {probe.stderr.strip()[-300:]}"


def _needs_root_and_a_user() -> None:
    """Skipped where it cannot run; under CI (CI=true, run as root) that is a failure."""
    why = "needs root: makes a data folder as root, then fetches into it as another user" if os.geteuid() != 0 \
        else _as_nobody_fails()
    if why and os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI runs the suite as root with an interpreter every user can run, so that this walk runs")
    if why:
        pytest.skip(why)


def test_c_a_data_folder_a_root_run_made_reads_for_a_user_and_a_missing_file_is_one_line(mirror):
    _needs_root_and_a_user()
    url, _, pins, _ = mirror
    top = Path(tempfile.mkdtemp(prefix="harness-data-"))   # not under pytest's 0700 folder: the user must reach it
    try:
        top.chmod(0o755)
        data_dir = top / "data"
        assert _fetch(url, pins, data_dir).returncode == 0           # the root run
        before = _tree(data_dir)

        reads = _fetch(url, pins, data_dir, user=NOBODY)            # everything present: verified by reading only
        assert reads.returncode == 0, reads.stderr
        assert _said(reads) == [f"data: cifar10: verified in {data_dir / 'cifar10'}",
                                f"data: cora: verified in {data_dir / 'cora_planetoid'}",
                                f"data: multi30k: verified in {data_dir / 'multi30k_task1'}"]

        (data_dir / cora.FOLDER / "ind.cora.y").unlink()
        gone = dict(before)
        del gone["cora_planetoid/ind.cora.y"]
        proc = _fetch(url, pins, data_dir, user=NOBODY)
        assert proc.returncode == 2
        assert _said(proc) == [f"error: data: {data_dir / 'cora_planetoid'} is owned by root and not writable by you "
                               f"(nobody): pass --data-dir FOLDER you own, or have root run "
                               f"`chown -R nobody {data_dir}`"]
        assert _tree(data_dir) == gone                                # nothing written, nothing half-written
    finally:
        shutil.rmtree(top)


# --- the download itself, in this process ---------------------------------------------------------------------------

class _Cut(http.server.BaseHTTPRequestHandler):
    """Promises 1000 bytes, sends 100, closes the connection."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"x" * 100)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_a_connection_closed_mid_download_leaves_nothing_half_written(tmp_path, serve, monkeypatch):
    monkeypatch.delenv(fetch.MIRROR_ENV, raising=False)
    url = serve(tmp_path, _Cut) + "/cora_planetoid/ind.cora.x"
    dest = tmp_path / "data" / "cora_planetoid" / "ind.cora.x"
    with pytest.raises(HarnessError) as e:
        fetch.download(url, dest, "0" * 64, "cora")
    assert str(e.value) == (f"data: could not download {url} (the connection closed after 100 of 1000 bytes); put "
                            f"ind.cora.x in {dest.parent} by hand or pass --data-dir, or run without it: --synthetic "
                            f"cora")
    assert list(dest.parent.iterdir()) == []


def test_an_interrupt_mid_download_leaves_nothing_half_written(tmp_path, serve, monkeypatch):
    (tmp_path / "srv" / "cora_planetoid").mkdir(parents=True)
    (tmp_path / "srv" / "cora_planetoid" / "ind.cora.x").write_bytes(b"y" * 5000)
    monkeypatch.setenv(fetch.MIRROR_ENV, serve(tmp_path / "srv"))

    def interrupt(self, n):
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch._Progress, "update", interrupt)
    dest = tmp_path / "data" / "cora_planetoid" / "ind.cora.x"
    with pytest.raises(KeyboardInterrupt):
        fetch.download(cora.URLS["ind.cora.x"], dest, hashlib.sha256(b"y" * 5000).hexdigest(), "cora")
    assert list(dest.parent.iterdir()) == []


def test_a_file_mirror_serves_a_split_layout_imdb_folder(tmp_path, monkeypatch):
    """A data folder holding imdb's split tarballs (not the official one) served by file://: both are fetched and
    verified against their pins; the unpinned members lists are not fetched."""
    fx = fixtures.imdb(tmp_path / "mirror" / imdb.FOLDER, np.random.RandomState(1), per_class=2, layout="split")
    monkeypatch.setenv(fetch.MIRROR_ENV, (tmp_path / "mirror").as_uri() + "/")
    with fixtures.pinned(imdb, fx.pins):
        folder = datasets.prepare("imdb", tmp_path / "data", allow_download=True)
    assert sorted(p.name for p in folder.iterdir()) == sorted(imdb.SPLIT_FILES)


def test_a_mirror_missing_a_file_names_it_and_what_to_serve(tmp_path, monkeypatch):
    (tmp_path / "mirror").mkdir()
    monkeypatch.setenv(fetch.MIRROR_ENV, (tmp_path / "mirror").as_uri())
    with pytest.raises(HarnessError, match=r"^data: the mirror has no cora_planetoid/ind\.cora\.x \(file://.*"
                                           r"--synthetic cora$"):
        datasets.prepare("cora", tmp_path / "data", allow_download=True)
    assert list((tmp_path / "data" / cora.FOLDER).iterdir()) == []


def test_a_mirror_of_another_scheme_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(fetch.MIRROR_ENV, "ftp://example.org/data")
    with pytest.raises(HarnessError, match=r"^HARNESS_DATA_MIRROR=ftp://example\.org/data is not an http://, "
                                           r"https:// or file:// URL; .*") as e:
        datasets.prepare("cora", tmp_path / "data", allow_download=True)
    assert "\n" not in str(e.value)


def test_run_turns_an_oserror_about_the_data_folder_into_one_line(tmp_path, monkeypatch, capsys):
    """An OSError from under --data-dir that escapes the data helpers (a folder gone unreadable mid-run) is the data
    folder's one line, not a traceback; one about another file names it."""
    from harness.launch import runner

    data_dir = tmp_path / "data"
    errors = iter([OSError(errno.ENOSPC, "No space left on device", str(data_dir / "cifar10" / "x")),
                   OSError(errno.EIO, "Input/output error", "/elsewhere/file")])

    def fail(*args, **kw):
        raise next(errors)

    monkeypatch.setattr(runner, "run", fail)
    argv = ["run", "--platform", "cpu", "--out", str(tmp_path / "o"), "--data-dir", str(data_dir)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (f"error: data: no space left to write {data_dir / 'cifar10' / 'x'} (No space "
                                       f"left on device): free space there (df -h {data_dir / 'cifar10'}) or pass "
                                       f"--data-dir FOLDER on another disk\n")
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == "error: /elsewhere/file: Input/output error; check it (ls -l) and run again\n"


def test_a_mirror_with_neither_imdb_layout_says_both(tmp_path, monkeypatch):
    (tmp_path / "mirror" / imdb.FOLDER).mkdir(parents=True)
    monkeypatch.setenv(fetch.MIRROR_ENV, (tmp_path / "mirror").as_uri())
    with pytest.raises(HarnessError, match=r"^data: the mirror has neither imdb_aclimdb/aclImdb_v1\.tar\.gz nor both "
                                           r"split tarballs .*--synthetic imdb$"):
        datasets.prepare("imdb", tmp_path / "data", allow_download=True)
    assert list((tmp_path / "data" / imdb.FOLDER).iterdir()) == []
