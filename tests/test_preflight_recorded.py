"""A recorded host is checked from its recording alone: `--record DIR` saves every fact the checks read (the
allocators this host has and each kind of cell gets, its tuning, CPU, memory and data folder, the environment
variables, what the expected run recorded), and `--host-dir DIR` gives the same rows from that folder on a host
that differs in every one of them. The checks themselves do no I/O: they run with files, programs and the
environment out of reach. A recording from before these facts were gathered still loads."""

import builtins
import glob
import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from harness.host import allocator, configdiff, envinfo
from harness.paths import expected_runs
from harness.preflight import NOTE, PASS, data
from harness.preflight import __main__ as pf
from harness.preflight import host as probe
from harness.preflight.host import Host
from tests.conftest import REPO

ROWS = ("memory allocator (CPU cells)", "host tuning", "host memory", "datasets", "CPU")


def _set_host(monkeypatch, tmp_path, *, libs, thp, governor, cpu, cores, mem_kb, tools, allocator_env, datasets):
    """Make the live host one with these allocator libraries, tuning, CPU, memory, package managers,
    HARNESS_ALLOCATOR and datasets present."""
    monkeypatch.setattr(allocator, "find_library", lambda name: f"/usr/lib/lib{name}.so" if name in libs else None)
    folder = tmp_path / f"sys-{thp}"
    folder.mkdir()
    (folder / "thp").write_text(" ".join(f"[{w}]" if w == thp else w for w in ("always", "madvise", "never")) + "\n")
    (folder / "governor").write_text(governor + "\n")
    monkeypatch.setitem(configdiff.TUNING, "transparent_hugepage", str(folder / "thp"))
    monkeypatch.setitem(configdiff.TUNING, "cpu_governor", str(folder / "governor"))
    (folder / "cpuinfo").write_text(f"processor\t: 0\nmodel name\t: {cpu}\n")
    real_read = envinfo.Path.read_text
    monkeypatch.setattr(envinfo.Path, "read_text", lambda self, *a, **k: real_read(
        folder / "cpuinfo" if str(self) == "/proc/cpuinfo" else
        folder / "meminfo" if str(self) == "/proc/meminfo" else self, *a, **k))
    (folder / "meminfo").write_text(f"MemTotal:       {mem_kb} kB\n")
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    real_which = shutil.which
    monkeypatch.setattr(probe.shutil, "which", lambda cmd, path=None: (
        (f"/usr/bin/{cmd}" if cmd in tools else None) if cmd in probe.PACKAGE_TOOLS else real_which(cmd, path=path)))
    if allocator_env:
        monkeypatch.setenv("HARNESS_ALLOCATOR", allocator_env)
    else:
        monkeypatch.delenv("HARNESS_ALLOCATOR", raising=False)
    where = tmp_path / f"data-{thp}"
    for name, sub in probe.dataset_folders().items():
        if name in datasets:
            (where / sub).mkdir(parents=True)
            (where / sub / "f").write_text("x")
    monkeypatch.setenv("HARNESS_DATA_DIR", str(where))
    monkeypatch.setenv("PYTHON", sys.executable)


RECORDED = {"libs": (), "thp": "madvise", "governor": "performance", "cpu": "Recorded CPU 9000", "cores": 3,
            "mem_kb": 2 * 2**20, "tools": ("dnf",), "allocator_env": None, "datasets": ("cora",)}
LIVE = {"libs": ("tcmalloc", "jemalloc"), "thp": "never", "governor": "powersave", "cpu": "Live CPU 1", "cores": 64,
        "mem_kb": 512 * 2**20, "tools": ("apt-get",), "allocator_env": "system",
        "datasets": ("cifar10", "cora", "imdb", "multi30k")}


def _check(monkeypatch, capsys, *args) -> tuple[dict[str, tuple[str, str, str, str]], str]:
    """`python3 -m harness.preflight cpu --no-step ARGS`: {check: (found, needed, verdict, note)} of the rows above
    (None where absent), and what it printed."""
    got = []
    evaluate = pf.evaluate
    with monkeypatch.context() as m:
        m.setattr(pf, "evaluate", lambda *a, **k: got.append(evaluate(*a, **k)) or got[-1])
        pf.main(["cpu", "--no-step", *args])
    rows = {r.check: (r.found, r.needed, r.verdict, r.note) for r in got[0]}
    return {c: rows.get(c) for c in ROWS}, capsys.readouterr().out


@pytest.fixture
def recording(tmp_path, monkeypatch, capsys):
    """A cpu host checked and recorded (--record) as RECORDED: no tcmalloc or jemalloc, dnf, THP madvise, ..."""
    with monkeypatch.context() as m:
        _set_host(m, tmp_path, **RECORDED)
        rows, _ = _check(m, capsys, "--record", str(tmp_path / "recorded"))
    return tmp_path / "recorded", rows


def test_a_recorded_host_gives_its_own_allocator_tuning_and_host_rows(recording, tmp_path, monkeypatch, capsys):
    folder, recorded = recording
    found, _, verdict, note = recorded["memory allocator (CPU cells)"]
    assert found == "PyTorch's cells: glibc-tuned; MindSpore's model cells: system; MindSpore's operator cells: system"
    assert verdict == NOTE and note.endswith("sudo dnf install /usr/lib64/libtcmalloc_minimal.so.4, or run in the "
                                             "image (--container)")
    assert recorded["host tuning"][0] == "transparent hugepage: madvise; cpu governor: performance"
    assert recorded["CPU"][0] == "Recorded CPU 9000, 3 cores" and recorded["host memory"][0] == "2.0 GiB"
    assert recorded["datasets"][0].startswith(f"cora in {tmp_path / 'data-madvise'}; not yet: ")
    facts = json.loads((folder / "host.json").read_text())["facts"]
    assert facts["env"]["HARNESS_DATA_DIR"] == str(tmp_path / "data-madvise")
    assert facts["expected_run"]["name"] == "cpu-quick" and facts["expected_run"]["allocators"]

    _set_host(monkeypatch, tmp_path, **LIVE)   # the live host now differs in every fact
    live, _ = _check(monkeypatch, capsys)
    assert all(live[r][0] != recorded[r][0] for r in ROWS), (live, recorded)
    replay, out = _check(monkeypatch, capsys, "--host-dir", str(folder))
    assert replay == recorded, out
    assert f"on the recorded host {folder.name}" in out.splitlines()[0]


def test_host_dir_probes_nothing_of_the_live_host(recording, monkeypatch, capsys):
    folder, recorded = recording

    def live(*args, **kwargs):
        raise AssertionError("the live host was probed")

    for module, name in ((allocator, "find_library"), (allocator, "choose"), (configdiff, "host_tuning"),
                         (envinfo, "cpu_model"), (probe, "mem_total_gib"), (probe, "dataset_folders"),
                         (probe, "largest_rss"), (probe, "expected_run_facts"), (probe, "collect"),
                         (probe.shutil, "which"), (subprocess, "run")):
        monkeypatch.setattr(module, name, live)
    monkeypatch.setenv("HARNESS_ALLOCATOR", "jemalloc")
    monkeypatch.setenv("HARNESS_DATA_DIR", "/nonexistent")
    replay, out = _check(monkeypatch, capsys, "--host-dir", str(folder))
    assert replay == recorded, out


class _Forbidden(dict):
    def _no(self, *args, **kwargs):
        raise AssertionError("a check read the environment")

    __getitem__ = __contains__ = __iter__ = __len__ = get = keys = items = values = copy = _no


def _no_io(*args, **kwargs):
    raise AssertionError(f"a check did I/O: {args[:1]}")


def test_no_check_does_io(recording, monkeypatch):
    """Every row of a recorded cpu host (native and container) and of the GPU and NPU fixtures, computed with files,
    directories, programs and the environment out of reach."""
    folder, _ = recording
    hosts = [Host.from_folder(folder)] + [Host.from_folder(p.parent) for p in
                                          sorted((REPO / "tests/fixtures/preflight").glob("*/host.json"))]
    container = Host.from_folder(folder)
    container.facts["mode"] = "container"
    hosts.append(container)
    loaded = (data.cuda(), data.ascend(), data.host())
    measured = data.measured()
    with monkeypatch.context() as m:
        for module, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "lstat"),
                             (os, "scandir"), (os, "listdir"), (os, "access"), (subprocess, "Popen"),
                             (shutil, "which"), (glob, "glob"), (glob, "iglob")):
            m.setattr(module, name, _no_io)
        m.setattr(os, "environ", _Forbidden())
        rows = [pf.evaluate(h, *loaded, measured=measured) for h in hosts]
    assert all(rows)
    cpu = {r.check: r for r in rows[0]}
    assert set(ROWS) <= set(cpu) and cpu["host tuning"].verdict == NOTE
    assert {r.check: r for r in rows[-1]}["memory allocator (CPU cells)"].verdict == PASS


def test_the_expected_runs_env_json_is_read_once(monkeypatch):
    reads = []
    real = probe.Path.read_text
    monkeypatch.setattr(probe.Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k))
    probe.collect("cpu", mode="native", env={"PYTHON": sys.executable, "PATH": os.environ["PATH"]})
    # each committed quick run's, to find the nearest CPU's, and none twice
    want = [f / "env.json" for f in expected_runs("cpu", "quick")]
    assert len(want) > 1 and [p for p in reads if p.name == "env.json"] == want


def test_a_recording_from_before_these_facts_still_loads(tmp_path, monkeypatch, capsys):
    """The allocator and tuning rows say they were not recorded; memory, datasets and CPU are left out, as before."""
    (tmp_path / "host.json").write_text(json.dumps({"platform": "cpu", "facts": {"machine": "x86_64",
                                                                                   "mode": "native"}}))
    rows, _ = _check(monkeypatch, capsys, "--host-dir", str(tmp_path))
    assert rows["memory allocator (CPU cells)"][0] == rows["host tuning"][0] == "not recorded"
    assert rows["memory allocator (CPU cells)"][2] == rows["host tuning"][2] == NOTE
    assert rows["host memory"] is rows["datasets"] is rows["CPU"] is None


def test_a_recording_round_trips(tmp_path):
    for src in sorted((REPO / "tests/fixtures/preflight").glob("*/host.json")):
        h = Host.from_folder(src.parent)
        h.to_folder(tmp_path / src.parent.name)
        again = Host.from_folder(tmp_path / src.parent.name)
        assert (again.platform, again.outputs, again.facts) == (h.platform, h.outputs, h.facts), src.parent.name


def test_a_recorded_host_with_the_expected_allocators_passes(recording):
    folder, _ = recording
    h = Host.from_folder(folder)
    h.facts["allocators"] = {**h.facts["expected_run"]["allocators"], "available": {}}
    rows = {r.check: r for r in pf.evaluate(h, data.cuda(), data.ascend(), data.host(), steps=False)}
    assert rows["memory allocator (CPU cells)"].verdict == PASS
