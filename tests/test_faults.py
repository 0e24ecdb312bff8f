"""Faults a long run meets (harness/launch/faults.py): a full disk, a read-only run folder, the data folder vanishing
mid-run, a report folder that cannot be written. Each ends with exit code 2 and one line (`error: ...`) naming the
file and the fix, no traceback; nothing already measured is lost (the results written before the fault are byte for
byte the same, no half-written or temporary file is left), the cell that could not be written is not recorded as
done, and `--resume` after the fix finishes the run.

The first tests simulate the faults in process (os.write raising ENOSPC or EDQUOT: no subprocess, no cell run);
the others meet real ones with real GCN cells: a 1 MiB tmpfs filled up and a tmpfs remounted read-only (root,
else skipped; without root the read-only folder is made with chmod), the data folder moved away between cells, and
a report folder on a read-only or full file system."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import cli
from harness.host import envinfo
from harness.launch import faults, runner
from harness.results.store import write_atomic
from tests.helpers import write_matrix

FIRST, SECOND = "model/gcn/pytorch/eager/amp-off/1dev", "model/gcn/mindspore/graph/amp-off/1dev"
ROOT = os.geteuid() == 0


def _results(out: Path) -> dict[str, bytes]:
    """Every result file (and only those), by path: what must never change or vanish."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "cells").rglob("r*.json"))
            if p.name[1:-5].isdigit()}


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*.tmp")]


def _status(out: Path, cell: str) -> str | None:
    path = out / "cells" / cell / "r0.json"
    return json.loads(path.read_text())["status"] if path.exists() else None


def _one_error_line(stderr: str) -> str:
    """The run's progress lines may come first; the fault is the last line, the only `error:` one, no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert errors == [lines[-1]], stderr
    return lines[-1]


# --- simulated: os.write fails as a full disk does, in process ------------------------------------------------------

class Disk:
    """Stands in for the file system under `root`: once full, every os.write into a file there fails with `code`.
    It fills when the cell `fills_in` starts, or right after a file whose name ends with `fills_after` is
    written."""

    def __init__(self, root: Path, code: int, fills_in: str | None = None, fills_after: str | None = None):
        self.root, self.code, self.fills_in, self.fills_after = root, code, fills_in, fills_after
        self.full = False
        self._write = os.write

    def write(self, fd: int, data) -> int:
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        inside = name.startswith(str(self.root))
        if inside and self.full:
            raise OSError(self.code, os.strerror(self.code))
        n = self._write(fd, data)
        if inside and self.fills_after and Path(name).name.startswith(f".{self.fills_after}."):
            self.full = True
        return n


@pytest.fixture
def in_process(monkeypatch, tmp_path):
    """cli.main in this process, every cell `ok` at once (no child process), and no framework probe."""
    def fake_child(store, cell, repeat, platform, folders, synthetic, shim, node, log=None, turns=None,
                   accumulation_steps=1):
        disk = getattr(fake_child, "disk", None)
        if disk is not None and disk.fills_in == cell.id:
            disk.full = True
        return runner._base(cell, repeat, platform, synthetic) | {"status": "ok", "mean_throughput_other_epochs": 1.0}

    monkeypatch.setattr(runner, "_run_child", fake_child)
    monkeypatch.setattr(envinfo, "capture", lambda probe_frameworks=True: {"hostname": "test"})
    matrix = write_matrix(tmp_path / "m.toml", epochs=2, frameworks=("pytorch", "mindspore"), modes=("eager", "graph"))
    out = tmp_path / "run"
    real_write = os.write

    def run(*extra, disk: Disk | None = None):
        fake_child.disk = disk
        monkeypatch.setattr(os, "write", disk.write if disk is not None else real_write)
        try:
            return cli.main(["run", "--platform", "cpu", "--matrix", str(matrix), "--out", str(out), "--synthetic",
                             *extra])
        finally:
            monkeypatch.setattr(os, "write", real_write)

    return out, run


def test_a_failed_atomic_write_keeps_the_old_file_names_the_path_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "r0.json"
    write_atomic(path, "old")
    monkeypatch.setattr(os, "write", Disk(tmp_path, errno.ENOSPC, fills_after="r0.json").write)
    write_atomic(path, "new")  # the write that fills the disk still succeeds
    with pytest.raises(OSError) as e:
        write_atomic(path, "newer")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
    assert path.read_text() == "new" and not _temporaries(tmp_path)


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left on the device"),
                                         (errno.EDQUOT, "disk quota exceeded")])
@pytest.mark.parametrize("when", ["at the start", "while the second cell runs", "after the last result"])
def test_a_full_disk_stops_the_run_in_one_line_and_resume_finishes_it(in_process, capsys, code, words, when):
    out, run = in_process
    extra: tuple[str, ...] = ()
    if when == "at the start":  # run.json cannot be written: the folder is left empty, the run starts afresh
        disk = Disk(out, code)
        disk.full = True
    elif when == "while the second cell runs":  # its result cannot be written
        disk = Disk(out, code, fills_in=SECOND)
    else:  # the second cell's result is written, then run.json's end of the invocation cannot be
        assert run("--only", FIRST) == 0
        capsys.readouterr()
        disk, extra = Disk(out, code, fills_after="r0.json"), ("--resume",)
    before = _results(out) if out.exists() else {}

    assert run(*extra, disk=disk) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: cannot write {out}/") and words in line, line
    assert f"df -h {out}" in line and "then continue with --resume" in line, line
    assert {k: v for k, v in _results(out).items() if k in before} == before, "a result written before it changed"
    assert not _temporaries(out), "a half-written file was left"
    if when == "while the second cell runs":
        assert line.startswith(f"error: cannot write {out}/cells/{SECOND}/r0.json: "), line
        assert _status(out, FIRST) == "ok" and _status(out, SECOND) is None, "the unwritten cell is not recorded"
    if when == "after the last result":
        assert line.startswith(f"error: cannot write {out}/run.json: "), line
        assert _status(out, SECOND) == "ok", "its result was written before the disk filled"
        json.loads((out / "run.json").read_text())  # the earlier run.json stands, whole

    # Space freed: --resume keeps what is there and runs the rest.
    assert run("--resume") == 0
    err = capsys.readouterr().err
    assert _status(out, FIRST) == _status(out, SECOND) == "ok", err
    assert {k: v for k, v in _results(out).items() if k in before} == before
    if when == "while the second cell runs":
        assert f"{FIRST} r0: kept (ok)" in err and f"{SECOND} r0: ok in" in err


# --- real faults, real GCN cells --------------------------------------------------------------------------------
# cli.main in this process (no framework probe: envinfo.capture is stubbed), every cell a real child process; the
# fault is made between the first cell's result and the second cell (by wrapping runner._run_child), so where it
# strikes does not depend on timing.

@pytest.fixture
def tmpfs(tmp_path):
    """A 1 MiB tmpfs (root only), unmounted afterwards."""
    if not ROOT or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "tmpfs"
    where.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    yield where
    if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Write zeros into folder/filler until the file system says it is full."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left to flush when it is closed
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


@pytest.fixture
def two_cells(tmp_path, shared_data, monkeypatch):
    """run(out, *extra, fault=None) -> (exit code, stderr) for the fp32 GCN cells of PyTorch and MindSpore GRAPH on
    a copy of real Cora; `fault()` is called just before the second cell."""
    monkeypatch.setattr(envinfo, "capture", lambda probe_frameworks=True: {"hostname": "test"})
    matrix = write_matrix(tmp_path / "m.toml", epochs=2, frameworks=("pytorch", "mindspore"), modes=("eager", "graph"))
    data = tmp_path / "data"
    shutil.copytree(shared_data / "cora_planetoid", data / "cora_planetoid")
    real_child = runner._run_child

    def run(out: Path, *extra, fault=None):
        def child(store, cell, *args, **kw):
            if fault is not None and cell.id == SECOND:
                fault()
            return real_child(store, cell, *args, **kw)

        monkeypatch.setattr(runner, "_run_child", child)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(["run", "--platform", "cpu", "--matrix", str(matrix), "--out", str(out), "--data-dir",
                           str(data), *extra])
        return rc, err.getvalue()

    return data, run


def _resume_finishes(run, out: Path, kept: dict[str, bytes]) -> None:
    rc, err = run(out, "--resume")
    assert rc == 0, err
    assert f"{FIRST} r0: kept (ok)" in err and f"{SECOND} r0: ok in" in err, err
    assert _status(out, FIRST) == _status(out, SECOND) == "ok"
    assert {k: v for k, v in _results(out).items() if k in kept} == kept


def test_a_real_full_disk_between_cells(tmpfs, two_cells):
    _, run = two_cells
    out = tmpfs / "run"
    rc, err = run(out, fault=lambda: _fill(tmpfs))
    line = _one_error_line(err)
    assert rc == 2, err
    assert line.startswith(f"error: cannot write {out}/cells/{SECOND}/") and "no space left on the device" in line
    assert _status(out, FIRST) == "ok" and _status(out, SECOND) is None, "not recorded as done"
    assert not _temporaries(out)
    kept = _results(out)
    (tmpfs / "filler").unlink()
    _resume_finishes(run, out, kept)


def test_a_run_folder_turned_read_only_between_cells(tmp_path, two_cells):
    _, run = two_cells
    if ROOT:  # chmod does not stop root: remount a tmpfs read-only instead
        where = tmp_path / "ro"
        where.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)]).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        out = where / "run"

        def read_only(flag: bool):
            subprocess.run(["mount", "-o", f"remount,{'ro' if flag else 'rw'}", str(where)], check=True)
    else:
        out = tmp_path / "run"

        def read_only(flag: bool):
            for d in [out, *(p for p in out.rglob("*") if p.is_dir())]:
                d.chmod(0o555 if flag else 0o755)
    try:
        rc, err = run(out, fault=lambda: read_only(True))
        line = _one_error_line(err)
        assert rc == 2, err
        assert line.startswith(f"error: cannot write {out}/cells/"), line
        assert ("the file system is read-only" if ROOT else "permission denied") in line and "--resume" in line
        assert _status(out, FIRST) == "ok" and _status(out, SECOND) is None
        kept = _results(out)
        rc, err = run(out, "--resume")  # still read-only: refused before anything runs
        assert rc == 2 and _one_error_line(err).startswith(f"error: --out {out} cannot be written ("), err
        read_only(False)
        _resume_finishes(run, out, kept)
    finally:
        if ROOT:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_the_data_folder_vanishing_between_cells(tmp_path, two_cells):
    data, run = two_cells
    out, away = tmp_path / "run", tmp_path / "away"
    rc, err = run(out, fault=lambda: data.rename(away))
    line = _one_error_line(err)
    assert rc == 2, err
    assert line == (f"error: the cora data folder {data / 'cora_planetoid'} is gone or empty since the run started; "
                    f"restore it (copy it back or mount it again), then continue with --resume (finished cells are "
                    f"kept)")
    assert _status(out, FIRST) == "ok" and _status(out, SECOND) == "failed"  # failed is not done: it runs again
    kept = {k: v for k, v in _results(out).items() if FIRST in k}
    away.rename(data)
    _resume_finishes(run, out, kept)


def _measured_run(folder: Path) -> Path:
    cell = folder / "cells" / FIRST
    cell.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"schema": 1, "platform": "cpu", "profile": "quick",
                                                 "invocations": []}))
    (folder / "env.json").write_text(json.dumps({"hostname": "h", "packages": {"torch": "2.13.0+cpu"}}))
    (cell / "r0.json").write_text(json.dumps({
        "schema": 1, "cell": FIRST, "repeat": 0, "kind": "model", "model": "gcn", "framework": "pytorch",
        "mode": "eager", "amp": "off", "devices": 1, "status": "ok", "platform": "cpu", "synthetic": False,
        "throughput_unit": "nodes/s", "first_epoch_throughput": 1000.0, "mean_throughput_other_epochs": 2000.0,
        "curve": [[0.5, 0.6], [1.0, 0.75]], "time_to_target_s": 1.0, "metric": "accuracy", "target": 0.7}))
    return folder


def _report(run: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = cli.main(["report", str(run), "--out", str(out)])
    return rc, err.getvalue()


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_report_folder_that_cannot_be_written(tmp_path, fault):
    run = _measured_run(tmp_path / "run")
    before = {str(p): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    out = tmp_path / "report"
    out.mkdir()
    if ROOT:  # a tmpfs: 16 KiB fills with the first figures; remounted read-only stops root too
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={'16k' if fault == 'full' else '4m'}", "tmpfs",
                           str(out)]).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
    elif fault == "full":
        pytest.skip("a full file system needs a tmpfs, which needs root")

    def read_only(flag: bool):
        if ROOT:
            subprocess.run(["mount", "-o", f"remount,{'ro' if flag else 'rw'}", str(out)], check=True)
        else:
            out.chmod(0o555 if flag else 0o755)
    try:
        if fault == "read-only":
            read_only(True)
        rc, err = _report(run, out)
        assert rc == 2, err
        line = _one_error_line(err)
        words = {"full": "no space left on the device", "read-only": "the file system is read-only" if ROOT
                 else "permission denied"}[fault]
        assert line.startswith(f"error: cannot write the report to {out}/") and words in line, line
        assert line.endswith("or choose another report folder with --out (the run folders are unchanged)"), line
        assert {str(p): p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
        assert not _temporaries(out)
        # Fixed (writable again), or another --out: the report renders from the same, untouched run.
        if fault == "read-only":
            read_only(False)
        again = out if fault == "read-only" else tmp_path / "elsewhere"
        rc, err = _report(run, again)
        assert rc == 0 and (again / "report.html").is_file(), err
    finally:
        if ROOT:
            subprocess.run(["umount", "-l", str(out)], capture_output=True)


def test_storage_faults_are_told_apart_from_a_cells_own_errors(tmp_path):
    out = tmp_path / "run"
    assert faults.storage(OSError(errno.ENOSPC, "full"), out)  # write() names no file: the run folder's
    assert faults.storage(OSError(errno.EROFS, "ro", str(out / "cells" / "x")), out)
    assert not faults.storage(OSError(errno.ENOENT, "gone", "/usr/bin/torchrun"), out)  # a missing launcher
    assert not faults.storage(OSError(errno.EROFS, "ro", str(tmp_path / "elsewhere")), out)
    assert not faults.storage(ValueError("x"), out)
