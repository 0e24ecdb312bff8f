"""Repeats where a verdict needs them: the model cells the claims C1-C4 compare and the scaling cells C5 compares
get the profile's `claim_repeats`, the others its `repeats`; `run --repeats N` sets every cell's; `--resume` runs only
the repeats not yet ok."""

import pytest

from harness.claims import paper
from harness.claims.models import compared_settings, scaled_settings
from harness.config import matrix as matrix_mod
from harness.config import study
from harness.errors import HarnessError
from tests.helpers import harness, write_matrix


def _repeats(profile, repeats=None):
    return {c.id: c.repeats for c in matrix_mod.load(None).expand(profile, repeats=repeats)}


def test_the_cells_a_claim_compares_are_the_ones_the_matrix_repeats():
    """The matrix repeats the settings harness.config.study names; the claims' own rows (C1's throughput, C3, C4 and
    the baselines) compare exactly these, and the scaling claim exactly its baseline modes."""
    settings = compared_settings()
    assert {("pytorch", "eager", "off"), ("mindspore", "graph", "off"), ("mindspore", "pynative", "off"),
            ("pytorch", "eager", "O2"), ("mindspore", "graph", "O2"), ("mindspore", "graph", "O3")} == settings
    assert study.compared_settings() == settings and study.scaled_settings() == scaled_settings()
    assert set(paper.PAPER_FASTER) == set(study.PAPER_MODELS)   # C1 says which is faster on each paper model


def test_claim_cells_get_the_profiles_claim_repeats_and_the_others_its_repeats():
    quick = _repeats("quick")
    assert quick["model/gcn/pytorch/eager/amp-off/1dev"] == 2
    assert quick["model/gru/mindspore/graph/amp-O3/1dev"] == 2
    assert quick["model/gcn/mindspore/pynative/amp-O2/1dev"] == 1       # no claim compares PyNative at O2
    assert quick["scaling/resnet50/pytorch/eager/amp-off/2dev"] == 2        # C5 compares the baseline modes' scaling
    assert quick["scaling/resnet50/mindspore/graph/amp-off/2dev"] == 2
    assert "scaling/resnet50/mindspore/pynative/amp-off/2dev" not in quick   # ...and no claim PyNative's
    assert quick["model/bert/mindspore/graph/amp-off/1dev"] == 1            # companion models: no verdict rests on them
    assert {n for c, n in quick.items() if c.startswith("operator/")} == {2}   # O1-O3: processes differ
    assert {n for c, n in quick.items() if c.startswith(("inference/", "passes/"))} == {1}
    assert set(_repeats("target").values()) == {2}                          # then up to max_repeats 3: sequential
    assert set(_repeats("full").values()) == {3}                            # repeats 3 already, no claim_repeats


def test_run_repeats_sets_every_cells_and_must_be_positive():
    assert set(_repeats("quick", repeats=4).values()) == {4}
    assert set(_repeats("target", repeats=1).values()) == {1}
    with pytest.raises(HarnessError, match="at least 1 repeat"):
        _repeats("quick", repeats=0)


def test_the_matrix_check_knows_claim_repeats(tmp_path):
    m = write_matrix(tmp_path / "m.toml", extra="")
    m.write_text(m.read_text().replace("repeats = 1\ntimeout_s", "repeats = 1\nclaim_repeats = 0\ntimeout_s"))
    p = harness("list", "--matrix", m)
    assert p.returncode == 2 and "claim_repeats >= 1" in p.stderr
    m.write_text(m.read_text().replace("claim_repeats = 0", 'claim_repeats = "three"'))
    p = harness("list", "--matrix", m)
    assert p.returncode == 2 and "claim_repeats" in p.stderr


def test_resume_with_more_repeats_runs_only_the_missing_ones(tmp_path):
    m = write_matrix(tmp_path / "m.toml", epochs=3)
    m.write_text(m.read_text().replace("repeats = 1\ntimeout_s", "repeats = 1\nclaim_repeats = 2\ntimeout_s"))
    out, cell = tmp_path / "run", "model/gcn/pytorch/eager/amp-off/1dev"
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m, "--repeats", "1")
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in (out / "cells" / cell).glob("r*.json") if ".spec" not in f.name) == ["r0.json"]
    first = (out / "cells" / cell / "r0.json").read_text()
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m, "--resume")  # claim_repeats 2
    assert p.returncode == 0, p.stderr
    assert f"{cell} r0: kept (ok)" in p.stderr and f"{cell} r1: ok" in p.stderr
    assert (out / "cells" / cell / "r0.json").read_text() == first
    assert not list((out / "cells" / cell).glob("r0.prev*"))


def test_figure4_draws_each_point_as_the_median_with_a_whisker_over_the_repeats(tmp_path, monkeypatch):
    import matplotlib.axes

    from harness.report import build as report
    from harness.report import figures
    from harness.results import measure
    cell = "scaling/resnet50/pytorch/eager/amp-off/2dev"
    s = measure.summarise({"cell": cell, "status": "ok", "kind": "scaling", "model": "resnet50", "framework":
                           "pytorch", "mode": "eager", "amp": "off", "devices": 2, "global_throughput": g,
                           "efficiency": e} for g, e in ((170.0, 0.85), (180.0, 0.9), (200.0, 1.0)))[cell]
    row = report._row("cpu", s)
    assert row["global_throughput_spread"]["median"] == 180.0 and row["global_throughput_spread"]["min"] == 170.0
    assert row["efficiency_spread"]["max"] == 1.0
    one = {**row, "kind": "model", "devices": 1, "other_epochs": {"median": 100.0, "min": 95.0, "max": 110.0}}
    calls = []
    original = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, yerr=None, **kw):
        calls.append((list(x), list(y), yerr))
        return original(self, x, y, yerr=yerr, **kw)
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    assert figures.scaling([row, one], "cpu", tmp_path) is not None
    (x, y, yerr), (_, eff, eff_err) = calls
    assert x == [1, 2] and y == [100.0, 180.0] and yerr == [[5.0, 10.0], [10.0, 20.0]]
    assert eff == [1.0, 0.9] and eff_err[0] == [0.0, pytest.approx(0.05)] and eff_err[1] == [0.0, pytest.approx(0.1)]
    calls.clear()
    flat = {**row, "global_throughput_spread": {"median": 180.0, "min": 180.0, "max": 180.0},
            "efficiency_spread": {"median": 0.9, "min": 0.9, "max": 0.9}}
    figures.scaling([flat], "cpu", tmp_path)
    assert [c[2] for c in calls] == [None, None]   # one repeat: no whiskers
