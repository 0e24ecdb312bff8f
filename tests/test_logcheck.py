"""Event logs in MLPerf's format (harness/results/eventlog.py, harness/results/mlperf.py) and MLPerf's own compliance
checker on them (harness/logcheck): a real quick GCN run through the runner passes it, a log broken on purpose fails it,
the harness's checker config keeps the ruleset's common rules, and run folders written before the change are still
read (or refused in one line where they cannot be)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from harness import logcheck
from harness.config.cell import Cell
from harness.config.spec import ModelSpec
from harness.launch.progress import EpochLines
from harness.models import model_package
from harness.results import eventlog
from harness.scenarios import training
from tests.helpers import REPO, harness, write_matrix

CELL = "model/gcn/pytorch/eager/amp-off/1dev"
OLD_RUN = REPO / "docs" / "target" / "run-2026-11-23-cpu"


def _ruleset_file(name: str) -> Path:
    import mlperf_logging.compliance_checker as cc

    return Path(cc.__file__).parent / f"{logcheck.USAGE}_{logcheck.RULESET}" / name


def _rules(path: Path) -> tuple[dict[str, dict], dict]:
    """KEY records by name, and the BEGIN/END records, of a checker config (read as the checker reads it)."""
    records = yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # noqa: S506 - strings only, as the checker reads
    keys = {r["KEY"]["NAME"]: r["KEY"] for r in records if "KEY" in r}
    other = {k: r[k] for r in records for k in r if k != "KEY"}
    return keys, other


def _checks(record: dict) -> list[str]:
    check = record.get("CHECK", [])
    return [c.strip() for c in (check if isinstance(check, list) else [check])]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> Path:
    """A real run of the quick profile's GCN cell (3 epochs, synthetic Cora) through the runner."""
    tmp = tmp_path_factory.mktemp("quick")
    m = write_matrix(tmp / "m.toml", epochs=3)
    out = tmp / "run"
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    assert p.returncode == 0, p.stderr
    return out


def test_a_quick_runs_logs_pass_mlperfs_compliance_checker(quick_run):
    log = quick_run / "cells" / CELL / "r0.mllog"
    assert all(line.startswith(":::MLLOG {") for line in log.read_text().splitlines())
    assert not (quick_run / "cells" / CELL / "r0.events.jsonl").exists()
    assert ":::MLLOG" not in (quick_run / "cells" / CELL / "r0.log").read_text(), "events go to their file only"
    p = harness("check-logs", quick_run)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == [f"SUCCESS {CELL}/r0.mllog",
                                     "1 logs checked by mlperf_logging's compliance checker (--usage training "
                                     "--ruleset 6.1.0 --config harness/logcheck/common.yaml): 1 SUCCESS, 0 FAILED"]
    # The same verdict from the checker's own command line, as the config's header documents it.
    direct = subprocess.run(logcheck.command(log), capture_output=True, text=True, cwd=log.parent)
    assert direct.returncode == 0 and "SUCCESS" in direct.stderr
    assert f"Compliance checks: {REPO / 'harness' / 'models' / 'gcn' / 'logcheck.yaml'}" in direct.stderr


def _broken(log: Path, tmp_path: Path, edit) -> Path:
    lines = log.read_text().splitlines()
    out = tmp_path / f"broken-{len(list(tmp_path.iterdir()))}.mllog"
    out.write_text("\n".join(edit(lines)) + "\n")
    return out


def _without(key: str):
    return lambda lines: [line for line in lines if f'"key": "{key}"' not in line]


def _swap_with_next(key: str):
    def edit(lines):
        i = next(i for i, line in enumerate(lines) if f'"key": "{key}"' in line)
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        return lines
    return edit


@pytest.mark.parametrize("edit, words", [
    (_without("seed"), "Required EXACTLY_ONE occurrence of 'seed' but found 0"),
    (_without("submission_division"), "CHECK for 'init_stop' failed"),               # the ruleset's own rule
    (_swap_with_next("run_stop"), "CHECK for 'test_metric' failed"),                 # the old order: test, run_stop
    (_without("eval_stop"), "CHECK for 'epoch_start' failed"),                      # an evaluation left open
    (_swap_with_next("eval_accuracy"), "CHECK for 'eval_stop' failed"),              # accuracy after its eval_stop
    (lambda lines: [line.replace('"value": "adam"', '"value": "sgd"') for line in lines],
     "CHECK for 'opt_name' failed"),                                                   # gcn.yaml's rule
    (lambda lines: [line.replace(":::MLLOG ", "") for line in lines], "No log lines detected"),  # schema 1's lines
], ids=["key-removed", "division-after-init-stop", "run-stop-after-test", "eval-stop-removed",
        "accuracy-after-eval-stop", "wrong-optimiser", "no-prefix"])
def test_a_log_broken_on_purpose_fails(quick_run, tmp_path, edit, words):
    ok, why = logcheck.check(_broken(quick_run / "cells" / CELL / "r0.mllog", tmp_path, edit))
    assert not ok and words in why, why


def test_check_logs_on_a_broken_run_prints_the_failure_and_exits_2_in_one_line(quick_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(quick_run, run)
    log = run / "cells" / CELL / "r0.mllog"
    log.write_text("\n".join(_swap_with_next("run_stop")(log.read_text().splitlines())) + "\n")
    p = harness("check-logs", run)
    assert p.returncode == 2
    assert p.stdout.splitlines()[0].startswith(f"FAILED  {CELL}/r0.mllog: CHECK for 'test_metric' failed in line")
    assert "0 SUCCESS, 1 FAILED" in p.stdout
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: 1 of 1 event logs fail MLPerf's compliance")
    assert "-m mlperf_logging.compliance_checker" in p.stderr


def test_the_config_keeps_every_rule_of_the_rulesets_common_yaml():
    theirs, their_other = _rules(_ruleset_file("common.yaml"))
    ours, our_other = _rules(logcheck.CONFIG)
    for name, rule in theirs.items():
        assert name in ours, name
        assert ours[name].get("REQ") == rule.get("REQ"), name
        assert set(_checks(rule)) <= set(_checks(ours[name])), name
        if name == "submission_division":  # the one change: no enqueue of the ruleset's {division}_common.yaml
            assert "enqueue_config" not in ours[name]["POST"]
            assert "s['compile_time_mins'] = 240 if v['value'] == 'open' else 30" in ours[name]["POST"]
        elif "POST" in rule:
            assert rule["POST"].strip() in ours[name]["POST"], name
    # BEGIN: the ruleset's initial state, and the harness's beside it (run as the checker runs it: with its locals).
    theirs_s, ours_s = {}, {}
    exec(their_other["BEGIN"]["CODE"], {"s": theirs_s})  # noqa: S102
    exec(our_other["BEGIN"]["CODE"], {"s": ours_s}, {"config_file": str(logcheck.CONFIG)})  # noqa: S102
    assert theirs_s.items() <= ours_s.items()
    models_dir = Path(ours_s["models_dir"])
    assert models_dir == REPO / "harness" / "models"
    assert ours_s["benchmarks"] == sorted(p.parent.name for p in models_dir.glob("*/logcheck.yaml"))


def test_every_workload_has_a_rules_file_that_replaces_no_order_check():
    """Each matrix model's folder has logcheck.yaml, and common.yaml's benchmarks are those folders; a workload file
    that names a key replaces common.yaml's verdicts on it, so it names none that common.yaml checks the order on,
    except eval_accuracy (whose order common.yaml checks at eval_stop), repeating the ruleset's check on it."""
    import tomllib

    models = set(tomllib.loads((REPO / "harness" / "config" / "matrix.toml").read_text())["models"])
    state: dict = {}
    _, begin = _rules(logcheck.CONFIG)
    exec(begin["BEGIN"]["CODE"], {"s": state}, {"config_file": str(logcheck.CONFIG)})  # noqa: S102
    assert models <= set(state["benchmarks"])
    ours, _ = _rules(logcheck.CONFIG)
    ordered = {name for name, rule in ours.items() if any("s['" in c for c in _checks(rule))}
    theirs, _ = _rules(_ruleset_file("common.yaml"))
    for model in models:
        keys, _ = _rules(REPO / "harness" / "models" / model / "logcheck.yaml")
        assert keys["opt_name"]["CHECK"].strip() == f"v['value'] == '{model_package(model).MLPERF_KEYS['opt_name']}'"
        assert set(keys) & ordered <= {"eval_accuracy"}, model
        assert set(_checks(theirs["eval_accuracy"])) <= set(_checks(keys["eval_accuracy"])), model


MODELS = sorted(tomllib.loads((REPO / "harness" / "config" / "matrix.toml").read_text())["models"])
# Each model's workload built as a cell builds it (harness.launch.inprocess, synthetic data), a process a framework:
# per model, the name (the event log's opt_name) of the optimiser class its workload holds, else that class's path.
BUILT_OPTIMISERS = """
import json, sys
from harness.config import matrix
from harness.config.cell import Cell
from harness.config.spec import model_spec
from harness.launch.inprocess import set_up

framework = sys.argv[1]
if framework == "pytorch":
    import torch
    known = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
else:
    from mindspore import nn
    from mindspore.experimental import optim
    known = {"adam": nn.Adam, "adamw": optim.AdamW, "sgd": nn.Momentum}
m = matrix.load()
built = {}
for model in sys.argv[2:]:
    cell = Cell(id="optimiser", kind="model", model=model, framework=framework,
                mode="eager" if framework == "pytorch" else "pynative", amp="off", devices=1, repeats=1, timeout_s=0,
                seed=int(m.data["defaults"]["seed"]), spec=model_spec(m.data["models"][model], "quick"))
    kind = type(set_up(cell).workload.opt)
    built[model] = next((name for name, cls in known.items() if cls is kind), f"{kind.__module__}.{kind.__qualname__}")
print(json.dumps(built))
"""


@pytest.fixture(scope="module")
def built_optimisers(tmp_path_factory) -> dict[str, dict[str, str]]:
    from harness.frameworks import backend

    out = {}
    for framework in ("pytorch", "mindspore"):
        env = {**os.environ, **backend(framework).process_env("cpu"), "PYTHONPATH": str(REPO)}
        p = subprocess.run([sys.executable, "-c", BUILT_OPTIMISERS, framework, *MODELS], capture_output=True, text=True,
                           env=env, cwd=tmp_path_factory.mktemp("optimisers"), timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        out[framework] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("model", MODELS)
def test_the_logged_optimiser_is_the_one_the_model_code_builds(model, built_optimisers):
    """MLPerf's opt_name (sgd: MindSpore's nn.Momentum, whose update is torch.optim.SGD's) against the optimiser each
    framework's workload really holds."""
    opt_name = model_package(model).MLPERF_KEYS["opt_name"]
    assert {fw: built[model] for fw, built in built_optimisers.items()} == {"pytorch": opt_name, "mindspore": opt_name}


def test_the_event_log_writes_its_file_only_flushed_and_fails_loudly(tmp_path, capfd, monkeypatch):
    """Only its file, each event flushed, the caller named; an unknown key, a value JSON cannot hold and a failed
    write raise."""
    a, b = eventlog.EventLog(tmp_path / "a.mllog"), eventlog.EventLog(tmp_path / "b.mllog")
    a.log(eventlog.RUN_START, event_type=eventlog.START)
    b.log(eventlog.EVAL_ACCURACY, 0.5, epoch_num=0)
    # Read before close: every event is on disk as soon as it is logged (a killed cell keeps it).
    (ev,) = eventlog.read(tmp_path / "a.mllog")
    assert ev["key"] == "run_start" and ev["event_type"] == "INTERVAL_START" and ev["elapsed_s"] >= 0
    assert ev["metadata"]["file"] == "tests/test_logcheck.py" and ev["metadata"]["lineno"] > 0
    (ev,) = eventlog.read(tmp_path / "b.mllog")
    assert (ev["key"], ev["value"], ev["metadata"]["epoch_num"]) == ("eval_accuracy", 0.5, 0)
    with pytest.raises(ValueError, match="'eval_acc' is neither"):
        a.log("eval_acc", 0.5)
    # What mllog would swallow (logging an ERROR line instead of the event) fails as a plain write would.
    with pytest.raises(ValueError, match="could not log an event: Failed to encode"):
        a.log(eventlog.EVAL_ACCURACY, object(), epoch_num=0)

    def full(text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(b._f, "write", full)
    with pytest.raises(OSError) as e:
        b.log(eventlog.RUN_STOP, event_type=eventlog.END, status=eventlog.SUCCESS)
    assert e.value.errno == errno.ENOSPC  # the disk's error, which harness.launch.faults knows
    monkeypatch.undo()
    a.close()
    b.close()
    assert len(eventlog.read(tmp_path / "a.mllog")) == 1 and len(eventlog.read(tmp_path / "b.mllog")) == 1
    assert capfd.readouterr() == ("", ""), "nothing reaches the console"


def test_both_formats_are_read_and_a_line_cut_by_a_kill_is_dropped(tmp_path):
    new = ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", ' \
          '"value": 0.7, "metadata": {"file": "x.py", "lineno": 1, "epoch_num": 2, "elapsed_s": 3.5}}'
    old = '{"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.7, ' \
          '"metadata": {"epoch_num": 2}, "elapsed_s": 3.5}'
    for line in (new, old):
        e = eventlog.parse_line(line)
        assert (e["key"], e["value"], e["elapsed_s"], e["metadata"]["epoch_num"]) == ("eval_accuracy", 0.7, 3.5, 2)
    path = tmp_path / "r0.mllog"
    path.write_text(new + "\nsome other line\n" + new[:40])
    assert len(eventlog.read(path)) == 1


def test_a_run_folder_of_schema_1_is_still_read_and_its_curves_rebuild_the_same():
    meta = json.loads((OLD_RUN / "run.json").read_text())
    assert meta["schema"] == 1
    cells = sorted((OLD_RUN / "cells").rglob("r0.events.jsonl"))
    assert len(cells) == 6
    for log in cells:
        cell = Cell.from_dict(json.loads((log.parent / "r0.spec.json").read_text())["cell"])
        stored = json.loads((log.parent / "r0.json").read_text())
        rebuilt = training.summarise(eventlog.read(log), cell)
        for key in ("curve", "time_to_target_s", "best_metric", "test_metric", "first_epoch_throughput", "epochs"):
            assert rebuilt[key] == stored[key], (log, key)
    p = harness("results", OLD_RUN)
    assert p.returncode == 0 and p.stdout.count("ok ") == 6
    p = harness("check-logs", OLD_RUN)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "schema 1" in p.stderr and "bare JSON" in p.stderr


def test_the_setup_keys_have_this_artifacts_values(quick_run):
    events = {e["key"]: e for e in eventlog.read(quick_run / "cells" / CELL / "r0.mllog")}
    values = {k: e["value"] for k, e in events.items()}
    assert values["submission_division"] == "open" and values["submission_status"] == "research"
    assert values["submission_benchmark"] == "gcn" and values["cache_clear"] is False
    assert values["config_filename"] == f"cells/{CELL}/r0.spec.json"
    assert (quick_run / values["config_filename"]).is_file()
    assert values["train_samples"] == values["global_batch_size"] == 2708       # full-batch: every node, every step
    assert values["eval_samples"] == 500                                         # the Planetoid validation split
    assert values["lowest_numerical_precision_in_linear"] == "fp32" and values["opt_name"] == "adam"
    assert values["seed"] == json.loads((quick_run / values["config_filename"]).read_text())["cell"]["seed"]
    order = [e["key"] for e in eventlog.read(quick_run / "cells" / CELL / "r0.mllog")]
    assert order.index("submission_division") < order.index("init_stop") < order.index("run_start")
    assert order[-2:] == ["run_stop", "test_metric"]


def test_the_consoles_epoch_lines_read_the_log_as_it_grows(quick_run):
    shown, ticks = [], iter(range(0, 10_000, 20))
    spec = ModelSpec(dataset="cora", metric="accuracy", target=0.7, throughput_unit="nodes/s", epochs=3)
    lines = EpochLines(spec, shown.append, clock=lambda: next(ticks), every_s=10)
    for line in (quick_run / "cells" / CELL / "r0.mllog").read_text().splitlines(keepends=True):
        lines(line)
    assert [s.split(":")[0].strip() for s in shown] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
    assert all("nodes/s" in s and "accuracy" in s for s in shown)


def test_check_logs_leaves_the_run_folder_as_it_was(quick_run):
    before = {p: p.read_bytes() for p in quick_run.rglob("*") if p.is_file()}
    assert harness("check-logs", quick_run).returncode == 0
    assert {p: p.read_bytes() for p in quick_run.rglob("*") if p.is_file()} == before
    assert not (REPO / "compliance_checker.log").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
