"""Every bad input a user can give, as a table: the command line (harness and reproduce.sh), data, the matrix file,
results and the report. Each must end with exit code 2 and one line on stderr (`error: ...` or
`reproduce.sh: ...`) that names the thing, no traceback, and nothing already measured lost: a run folder the
command was pointed at holds exactly the same files, byte for byte, afterwards; a refused new run leaves no
folder behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.data import cora
from tests.helpers import REPO

MATRIX = (REPO / "harness" / "config" / "matrix.toml").read_text()
RESULT = {"schema": 1, "cell": "model/gcn/pytorch/eager/amp-off/1dev", "repeat": 0, "kind": "model", "model": "gcn",
          "framework": "pytorch", "mode": "eager", "amp": "off", "devices": 1, "status": "ok", "platform": "cpu",
          "synthetic": True, "mean_throughput_other_epochs": 1234.5, "first_epoch_throughput": 1000.0}


def measured_run(tmp_path: Path, meta: dict | list | None = None, result: dict | None = None) -> Path:
    """A run folder holding one measured result (what must never be lost)."""
    run = tmp_path / "run"
    cell = run / "cells" / RESULT["cell"]
    cell.mkdir(parents=True)
    meta = {"schema": 1, "platform": "cpu", "profile": "quick", "synthetic": "all", "invocations": []} \
        if meta is None else meta
    (run / "run.json").write_text(json.dumps(meta))
    (run / "env.json").write_text("{}")
    (cell / "r0.json").write_text(json.dumps(result or RESULT))
    (cell / "r0.log").write_text("measured\n")
    return run


def bad_matrix(tmp_path: Path, old: str, new: str) -> Path:
    assert old in MATRIX, old
    path = tmp_path / "m.toml"
    path.write_text(MATRIX.replace(old, new, 1))
    return path


H = "harness"
SH = "reproduce.sh"
# (id, program, setup(tmp_path) -> argv, words the error line must hold)
CASES: list[tuple[str, str, Callable[[Path], list], tuple[str, ...]]] = [
    # --- the harness command line -------------------------------------------------------------------------
    ("cli-unknown-command", H, lambda t: ["bogus"], ("invalid choice: 'bogus'",)),
    ("cli-unknown-platform", H, lambda t: ["run", "--platform", "tpu", "--out", t / "o"], ("invalid choice: 'tpu'",)),
    ("cli-missing-out", H, lambda t: ["run", "--platform", "cpu"], ("--out",)),
    ("cli-unknown-option", H, lambda t: ["list", "--turbo"], ("unrecognized arguments: --turbo",)),
    ("cli-unknown-profile", H, lambda t: ["run", "--platform", "cpu", "--profile", "huge", "--out", t / "o",
                                          "--synthetic"], ("unknown profile 'huge'", "quick")),
    ("cli-only-matches-nothing", H, lambda t: ["run", "--platform", "cpu", "--out", t / "o", "--synthetic",
                                               "--only", "model/vgg/*,x"], ("matches no cell",)),
    ("cli-out-is-a-file", H, lambda t: (t.joinpath("f").write_text("x"), ["run", "--platform", "cpu", "--out",
                                        t / "f", "--synthetic"])[1], ("is a file, not a folder",)),
    ("cli-out-under-a-file", H, lambda t: (t.joinpath("f").write_text("x"), ["run", "--platform", "cpu", "--out",
                                           t / "f" / "run", "--synthetic"])[1], ("cannot be created", "is a file")),
    ("cli-out-uncreatable", H, lambda t: ["run", "--platform", "cpu", "--out", "/proc/harness-no/run", "--synthetic",
                                          "--only", "model/gcn/pytorch/eager/amp-off/*"], ("cannot be created",)),
    ("cli-out-not-empty", H, lambda t: (t.joinpath("o").mkdir(), t.joinpath("o", "notes.txt").write_text("mine"),
                                        ["run", "--platform", "cpu", "--out", t / "o", "--synthetic"])[2],
     ("not empty", "new --out")),
    ("cli-out-holds-a-run", H, lambda t: ["run", "--platform", "cpu", "--out", measured_run(t), "--synthetic"],
     ("already holds a run", "--resume")),
    ("cli-resume-other-profile", H, lambda t: ["run", "--platform", "cpu", "--profile", "full", "--out",
                                               measured_run(t), "--synthetic", "--resume"], ("profile=quick",)),
    ("cli-resume-other-data", H, lambda t: ["run", "--platform", "cpu", "--out", measured_run(t), "--resume",
                                            "--synthetic", "cora", "--only", "model/gcn/*"], ("synthetic=all",)),
    ("cli-synthetic-unknown-dataset", H, lambda t: ["run", "--platform", "cpu", "--out", t / "o", "--synthetic",
                                                    "imagenet"], ("dataset 'imagenet'",)),
    ("cli-shard-not-k-of-n", H, lambda t: ["run", "--platform", "cpu", "--out", t / "o", "--synthetic", "--shard",
                                           "5/4"], ("--shard '5/4'", "1 <= K <= N")),
    ("cli-shard-empty", H, lambda t: ["run", "--platform", "cpu", "--out", t / "o", "--synthetic", "--only",
                                      "model/gcn/pytorch/eager/amp-off/*", "--shard", "2/2"], ("holds no cell",)),
    ("cli-resume-other-shard", H, lambda t: ["run", "--platform", "cpu", "--out", measured_run(t), "--synthetic",
                                             "--resume", "--shard", "1/2"], ("shard=None", "not 1/2")),
    ("cli-matrix-missing", H, lambda t: ["list", "--matrix", t / "none.toml"], ("does not exist",)),
    # --- reproduce.sh ------------------------------------------------------------------------------------------
    ("sh-unknown-platform", SH, lambda t: ["tpu"], ("unknown platform 'tpu'", "cpu, cuda or ascend")),
    ("sh-unknown-option", SH, lambda t: ["cpu", "--turbo"], ("unknown option '--turbo'", "--help")),
    ("sh-out-without-folder", SH, lambda t: ["cpu", "--out"], ("--out needs a folder",)),
    ("sh-only-without-glob", SH, lambda t: ["cpu", "--only"], ("--only needs a pattern",)),
    ("sh-native-with-image", SH, lambda t: ["cuda", "--native", "--image", "x"], ("drop --image/--build",)),
    ("sh-synthetic-empty", SH, lambda t: ["cpu", "--synthetic="], ("needs dataset names",)),
    ("sh-resume-other-platform", SH, lambda t: ["cuda", "--resume", "--out", measured_run(t), "--dry-run"],
     ("holds a cpu run, not cuda",)),
    # --- data ----------------------------------------------------------------------------------------------
    ("data-file-missing", H, lambda t: (t.joinpath("data", cora.FOLDER).mkdir(parents=True),
                                        ["run", "--platform", "cpu", "--out", t / "o", "--data-dir", t / "data",
                                         "--only", "model/gcn/*"])[1], ("is missing", "--synthetic cora")),
    ("data-file-corrupt", H, lambda t: ([t.joinpath("data", cora.FOLDER).mkdir(parents=True)]
                                        + [t.joinpath("data", cora.FOLDER, f).write_bytes(b"junk") for f in cora.FILES],
                                        ["run", "--platform", "cpu", "--out", t / "o", "--data-dir", t / "data",
                                         "--only", "model/gcn/*"])[1], ("wrong sha256",)),
    ("data-dir-is-a-file", H, lambda t: (t.joinpath("d").write_text("x"), ["run", "--platform", "cpu", "--out",
                                         t / "o", "--data-dir", t / "d", "--only", "model/gcn/*"])[1], ("missing",)),
    ("data-download-offline", H, lambda t: ["run", "--platform", "cpu", "--out", t / "o", "--data-dir", t / "data",
                                            "--download", "--only", "model/resnet50/*"],
     ("could not download", "--synthetic cifar10")),
    # --- the matrix file -----------------------------------------------------------------------------------
    ("matrix-bad-toml", H, lambda t: ["list", "--matrix", bad_matrix(t, "[axes]", "[axes")], ("not valid TOML",)),
    ("matrix-misspelt-table", H, lambda t: ["list", "--matrix", bad_matrix(t, "\n[[exclude]]\n", "\n[[exlude]]\n")],
     ("'exlude'", "allowed")),
    ("matrix-target-not-a-number", H, lambda t: ["list", "--matrix", bad_matrix(t, "target = 0.70",
                                                                                'target = "seventy"')],
     ("[models.gcn] target", "'seventy'", "must be a number")),
    ("matrix-newer-schema", H, lambda t: ["list", "--matrix", bad_matrix(t, "schema = 1", "schema = 2")],
     ("schema", "newer than this harness reads (1)")),
    ("matrix-unknown-model-key", H, lambda t: ["list", "--matrix", bad_matrix(t, 'metric = "bleu"',
                                                                              'metric = "bleu"\nepoch = 3')],
     ("[models.gru]", "'epoch'")),
    ("matrix-unknown-framework-in-profile", H, lambda t: ["list", "--matrix", bad_matrix(
        t, 'frameworks = ["pytorch", "mindspore"]\nmodes', 'frameworks = ["pytroch", "mindspore"]\nmodes')],
     ("[profiles.quick] frameworks", "'pytroch'")),
    ("matrix-rule-value-does-not-exist", H, lambda t: ["list", "--matrix", bad_matrix(
        t, 'framework = "pytorch"\nmode = ["graph"', 'framework = "pytroch"\nmode = ["graph"')],
     ("[[exclude]] rule 1 framework", "'pytroch'")),
    ("matrix-rule-without-why", H, lambda t: ["list", "--matrix", bad_matrix(
        t, 'why = "GRAPH and PYNATIVE are MindSpore execution modes"', "")], ("no 'why'",)),
    ("matrix-axis-wrong-type", H, lambda t: ["list", "--matrix", bad_matrix(t, "devices = [1, 2, 4, 8]",
                                                                            'devices = [1, "2", 4, 8]')],
     ("[axes] devices", "must be an integer")),
    ("matrix-repeats-wrong-type", H, lambda t: ["list", "--matrix", bad_matrix(t, "repeats = 1", 'repeats = "one"')],
     ("[profiles.quick] repeats", "must be an integer")),
    ("matrix-flag-not-true-or-false", H, lambda t: ["list", "--matrix", bad_matrix(
        t, "epochs = 200, stop_at_target = true", 'epochs = 200, stop_at_target = "yes"')],
     ("[models.gcn] profile.target stop_at_target", "must be true or false")),
    ("matrix-evals-per-epoch-zero", H, lambda t: ["list", "--matrix", bad_matrix(
        t, "epochs = 200, stop_at_target = true", "epochs = 200, stop_at_target = true, evals_per_epoch = 0")],
     ("[models.gcn] profile.target evals_per_epoch", "must be 1 or more")),
    ("matrix-skip-unknown-platform", H, lambda t: ["list", "--matrix", bad_matrix(t, 'platform = "cpu"',
                                                                                  'platform = "tpu"')],
     ("[[skip]] rule 1 platform", "'tpu'")),
    ("matrix-unknown-dataset", H, lambda t: ["list", "--matrix", bad_matrix(t, 'dataset = "cora"',
                                                                            'dataset = "imagenet"')],
     ("[models.gcn] dataset", "harness/data/imagenet.py")),
    ("matrix-sweep-lacks-a-key", H, lambda t: ["list", "--matrix", bad_matrix(t, ", out_features = [512] }", " }")],
     ("[operators.linear] quick", "out_features")),
    ("matrix-misspelt-model-profile", H, lambda t: ["list", "--matrix", bad_matrix(
        t, "profile.quick = { epochs = 30 }", "profile.quik = { epochs = 50 }")],
     ("[models.gcn] profile", "'quik'")),
    ("matrix-bad-on-run-leaves-no-folder", H, lambda t: ["run", "--platform", "cpu", "--out", t / "o", "--synthetic",
                                                         "--matrix", bad_matrix(t, "\n[[skip]]\n", "\n[[skp]]\n")],
     ("'skp'",)),
    # --- results ------------------------------------------------------------------------------------------
    ("results-not-a-run", H, lambda t: ["results", t], ("is not a run folder",)),
    ("results-run-json-newer-schema", H, lambda t: ["results", measured_run(t, meta={
        "schema": 3, "platform": "cpu", "profile": "quick"})], ("schema 3", "newer than this harness reads (2)")),
    ("results-result-newer-schema", H, lambda t: ["results", measured_run(t, result={**RESULT, "schema": 3})],
     ("r0.json has schema 3", "update the harness")),
    ("results-run-json-not-an-object", H, lambda t: ["results", measured_run(t, meta=["cpu"])], ("not an object",)),
    ("results-resume-newer-result", H, lambda t: ["run", "--platform", "cpu", "--out", measured_run(
        t, result={**RESULT, "schema": 3}), "--synthetic", "--resume"], ("schema 3",)),
    # A folder written before event logs were MLPerf's (schema 1): still read (results, report), never resumed.
    ("results-resume-schema-1-folder", H, lambda t: ["run", "--platform", "cpu", "--out", measured_run(t),
                                                     "--synthetic", "--resume"], ("schema 1", ":::MLLOG", "new --out")),
    ("results-check-logs-not-a-run", H, lambda t: ["check-logs", t], ("is not a run folder",)),
    ("results-check-logs-schema-1-folder", H, lambda t: ["check-logs", measured_run(t)],
     ("schema 1", "bare JSON", "new --out")),
    # --- the report ---------------------------------------------------------------------------------------
    ("report-not-a-run", H, lambda t: ["report", t], ("is not a run folder",)),
    ("report-run-json-lacks-keys", H, lambda t: ["report", measured_run(t, meta={"schema": 1, "invocations": []})],
     ("lacks 'platform', 'profile'",)),
    ("report-run-json-not-json", H, lambda t: (measured_run(t).joinpath("run.json").write_text("{platform"),
                                               ["report", t / "run"])[1], ("cannot be read",)),
    ("report-out-is-a-file", H, lambda t: (t.joinpath("f").write_text("x"), ["report", measured_run(t), "--out",
                                                                            t / "f"])[1], ("cannot be created",)),
    ("report-second-run-not-a-run", H, lambda t: ["report", measured_run(t), t / "nothing"], ("is not a run folder",)),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name, program, setup, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_loses_nothing(tmp_path, name, program, setup, words):
    argv = [str(a) for a in setup(tmp_path)]
    before = _snapshot(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "https_proxy": "http://127.0.0.1:9",
           "http_proxy": "http://127.0.0.1:9", "HARNESS_DEV_DIR": str(tmp_path / "nodev")}
    cmd = [sys.executable, "-m", "harness", *argv] if program == H else ["bash", str(REPO / "reproduce.sh"), *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    assert len(lines) == 1, f"expected one line on stderr, got: {p.stderr!r}"
    assert lines[0].startswith("error: " if program == H else "reproduce.sh: "), lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    after = _snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before, "a file that was there changed or went"
    assert not (tmp_path / "o").exists() or (tmp_path / "o" / "notes.txt").exists(), "a refused run left a folder"


def test_the_table_covers_every_kind_of_input():
    kinds = {c[0].split("-")[0] for c in CASES}
    assert kinds == {"cli", "sh", "data", "matrix", "results", "report"}
    assert len(CASES) >= 30
