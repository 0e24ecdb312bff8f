"""A run in another configuration than the expected results says so: the report's banner names each difference (the
allocator per framework and kind of cell, versions, cores, synthetic data) with what it moves and the measured size,
and `harness report A B` labels two such runs apart instead of merging them as repeats."""

import json
import shutil

from harness.host import configdiff
from harness.report import build as report
from tests.conftest import REPO

TARGET = REPO / "docs" / "runs" / "cpu-target"


def _copy(tmp_path, name, change=None):
    run = tmp_path / name
    shutil.copytree(TARGET, run, ignore=shutil.ignore_patterns("report"))
    if change:
        env = json.loads((run / "env.json").read_text())
        change(env)
        (run / "env.json").write_text(json.dumps(env))
    return run


def _with_tcmalloc(env):
    """The committed target run's host had no tcmalloc (glibc-tuned for PyTorch, glibc for MindSpore): this copy is
    the same run as a host with tcmalloc would record it."""
    env["allocators"]["per_framework"]["pytorch"] = "tcmalloc"
    env["allocators"]["operator_cells_on_cpu"]["mindspore"] = "tcmalloc"


def test_the_committed_run_matches_itself():
    meta = json.loads((TARGET / "run.json").read_text())
    env = json.loads((TARGET / "env.json").read_text())
    assert _diffs(meta, env) == []


def test_a_run_in_another_allocator_configuration_gets_a_banner_with_the_measured_size(tmp_path):
    run = _copy(tmp_path, "tcmalloc", _with_tcmalloc)
    html = report.render([run]).read_text()
    banner = html[html.index('id="config-diff"'):].split("</div>")[0]
    assert "allocator of PyTorch&#39;s cells tcmalloc, not glibc-tuned" in banner
    assert "C1 and every PyTorch CPU throughput; measured: PyTorch&#39;s ResNet50 on 2 cores under tcmalloc ran " \
           "at 1.07x at batch 16, 1.11x at batch 32, 0.98x at batch 128 of its glibc-tuned throughput" in banner
    assert "allocator of MindSpore&#39;s operator cells tcmalloc, not system (it moves Figure 5" in banner
    plain = report.render([_copy(tmp_path, "same")]).read_text()
    assert 'id="config-diff"' not in plain


def test_two_runs_that_differ_in_allocators_are_labelled_apart(tmp_path):
    a, b = _copy(tmp_path, "a"), _copy(tmp_path, "b", _with_tcmalloc)
    hosts, _ = report.merge([a, b])
    labels = [h["label"] for h in hosts]
    assert len(labels) == 2 and all("allocators: " in label for label in labels)
    assert any("pytorch model tcmalloc" in label for label in labels)
    assert any("pytorch model glibc-tuned" in label for label in labels)


def test_host_tuning_is_recorded_and_compared_only_where_both_runs_recorded_it(tmp_path, monkeypatch):
    thp = tmp_path / "enabled"
    thp.write_text("always [madvise] never\n")
    monkeypatch.setitem(configdiff.TUNING, "transparent_hugepage", str(thp))
    monkeypatch.setitem(configdiff.TUNING, "cpu_governor", str(tmp_path / "absent"))
    assert configdiff.host_tuning() == {"transparent_hugepage": "madvise", "cpu_governor": None}
    meta = json.loads((TARGET / "run.json").read_text())
    env = json.loads((TARGET / "env.json").read_text())
    env["host_tuning"] = {"transparent_hugepage": "always", "cpu_governor": None}
    assert _diffs(meta, env) == []   # the committed run recorded none: nothing to name
    monkeypatch.setattr(configdiff, "_load", lambda path: (
        {**json.loads(path.read_text()), "host_tuning": {"transparent_hugepage": "madvise", "cpu_governor": None}}
        if path.name == "env.json" else json.loads(path.read_text())))
    diffs = _diffs(meta, env)
    assert [(d["what"], d["here"], d["expected"]) for d in diffs] == [("transparent hugepage", "always", "madvise")]


def _diffs(meta: dict, env: dict) -> list[dict]:
    """The banner's differences, from the expected run found as the report finds it (configdiff.expected_for)."""
    return configdiff.differences(meta, env, configdiff.expected_for(meta, env))
