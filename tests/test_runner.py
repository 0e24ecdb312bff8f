"""The runner keeps every result: a killed cell, a timeout, Ctrl-C, --resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO, harness, quick_pynative_matrix, write_matrix

CELL = "model/gcn/pytorch/eager/amp-off/1dev"


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "harness", *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})


def _child_pids(spec: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness.launch.child" in cmd and str(spec).encode() in cmd:
            pids.append(int(proc.name))
    return pids


def _wait_for_epochs(events: Path, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if events.exists() and events.read_text().count('"epoch_stop"') >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {n} epochs in {events} after {timeout} s")


def _result(out: Path, name: str = "r0.json") -> dict:
    return json.loads((out / "cells" / CELL / name).read_text())


def test_killed_cell_is_recorded_with_its_partial_measurements_then_resume_reruns_it(tmp_path):
    m = write_matrix(tmp_path / "m.toml", epochs=400)
    out = tmp_path / "run"
    runner = _start("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    cell_dir = out / "cells" / CELL
    _wait_for_epochs(cell_dir / "r0.mllog", 3)
    for pid in _child_pids(cell_dir / "r0.spec.json"):
        os.kill(pid, signal.SIGKILL)
    _, err = runner.communicate(timeout=120)
    assert runner.returncode == 1, err
    failed = _result(out)
    assert failed["status"] == "failed" and failed["signal"] == "SIGKILL"
    assert "killed by SIGKILL" in failed["reason"]
    assert len(failed["epochs"]) >= 3 and failed["curve"], "what the cell measured before dying is kept"
    assert failed["first_epoch_throughput"] > 0

    # Without --resume the folder is refused; with it the failed cell runs again and the old result is kept.
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    assert p.returncode == 2 and "--resume" in p.stderr
    write_matrix(m, epochs=3)
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m, "--resume")
    assert p.returncode == 0, p.stderr
    assert _result(out)["status"] == "ok"
    assert _result(out, "r0.prev1.json")["signal"] == "SIGKILL"
    assert (out / "cells" / CELL / "r0.prev1.log").exists()

    # A second --resume keeps the ok cell and runs nothing.
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m, "--resume")
    assert p.returncode == 0 and "kept (ok)" in p.stderr
    assert not (out / "cells" / CELL / "r0.prev2.json").exists()


def test_timeout_kills_the_cell_and_keeps_its_curve(tmp_path):
    # The timeout counts from the cell's start, its set-up included: on a 2-core host under CI's three lanes (load
    # average 8) the GCN cell took 7.5 s to start and had no epoch done at 12 s. 40 s leaves it time for several.
    m = write_matrix(tmp_path / "m.toml", epochs=100000, timeout_s=40)
    out = tmp_path / "run"
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    assert p.returncode == 1
    r = _result(out)
    assert r["status"] == "timeout" and "timeout of 40 s" in r["reason"]
    assert r["curve"] and r["epochs"], "epochs measured before the timeout are kept"
    assert not _child_pids(out / "cells" / CELL / "r0.spec.json"), "no process is left behind"


def test_ctrl_c_stops_cleanly_keeps_finished_cells_and_resume_finishes(tmp_path):
    m = write_matrix(tmp_path / "m.toml", epochs=3, frameworks=("pytorch", "mindspore"), modes=("eager", "graph"))
    out = tmp_path / "run"
    runner = _start("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    ms_cell = out / "cells" / "model/gcn/mindspore/graph/amp-off/1dev"
    deadline = time.monotonic() + 180
    while not (ms_cell / "r0.spec.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    assert "--resume" in err.strip().splitlines()[-1]
    assert _result(out)["status"] == "ok"
    assert not (ms_cell / "r0.json").exists()
    assert not _child_pids(ms_cell / "r0.spec.json")
    meta = json.loads((out / "run.json").read_text())
    assert meta["invocations"][-1]["interrupted"] is True

    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m, "--resume")
    assert p.returncode == 0, p.stderr
    assert json.loads((ms_cell / "r0.json").read_text())["status"] == "ok"


def test_resume_refuses_a_run_of_another_platform(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"platform": "cuda", "profile": "quick", "synthetic": True,
                                              "invocations": []}))
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--resume")
    assert p.returncode == 2 and "platform=cuda, not cpu" in p.stderr


def test_cells_that_cannot_start_fail_with_their_reason_and_the_run_goes_on(tmp_path, monkeypatch):
    """A missing launcher (OSError from exec) or a back-end that raises while the cell is prepared: each is a
    failed cell with its reason; the run visits every cell and ends with exit code 1, no traceback."""
    from harness.config import matrix as matrix_mod
    from harness.frameworks import mindspore as ms_backend
    from harness.frameworks import pytorch as pt_backend
    from harness.launch import runner

    monkeypatch.setattr(pt_backend, "launch_argv", lambda *a, **k: [str(tmp_path / "no-such-launcher"), "x"])

    def broken_env(platform, kind="model"):
        raise RuntimeError("back-end broke while preparing the cell")

    monkeypatch.setattr(ms_backend, "process_env", broken_env)
    lines = []
    out = tmp_path / "run"
    rc = runner.run(matrix_mod.load(quick_pynative_matrix(tmp_path / "m.toml")), "quick", "cpu", out,
                    only="scaling/resnet50/*", synthetic="all",
                    repeats=1, log=lines.append)  # one repeat: C5's claim_repeats would fail two cells twice
    assert rc == 1
    results = {p.parent.relative_to(out / "cells").as_posix(): json.loads(p.read_text())
               for p in (out / "cells").rglob("r0.json")}
    assert set(results) == {"scaling/resnet50/pytorch/eager/amp-off/2dev",
                            "scaling/resnet50/mindspore/graph/amp-off/2dev",
                            "scaling/resnet50/mindspore/pynative/amp-off/2dev"}
    pt = results["scaling/resnet50/pytorch/eager/amp-off/2dev"]
    assert pt["status"] == "failed" and pt["reason"].startswith("could not start")
    assert "no-such-launcher" in pt["reason"]
    for mode in ("graph", "pynative"):
        ms = results[f"scaling/resnet50/mindspore/{mode}/amp-off/2dev"]
        assert ms["status"] == "failed" and "back-end broke while preparing the cell" in ms["reason"]
    assert lines[-1].startswith("done: 3 failed")


def test_launchers_start_from_this_interpreter_not_from_path():
    """torchrun and msrun are started as `sys.executable -m <module>`: no cell depends on PATH."""
    from harness.frameworks import mindspore as ms_backend
    from harness.frameworks import pytorch as pt_backend

    for backend, module in ((pt_backend, "torch.distributed.run"), (ms_backend, "harness.launch.msrun")):
        argv = backend.launch_argv(2, "/x/spec.json", 12345, "/x/logs", {})
        assert argv[:3] == [sys.executable, "-m", module]
