"""Repeats where a verdict needs them: the model cells the claims C1-C4 compare get the profile's `claim_repeats`,
the others its `repeats`; `run --repeats N` sets every cell's; `--resume` runs only the repeats not yet ok."""

import pytest

from harness import matrix as matrix_mod
from harness.claims.models import compared_settings
from harness.errors import HarnessError
from tests.conftest import harness, write_matrix


def _repeats(profile, repeats=None):
    return {c.id: c.repeats for c in matrix_mod.load(None).expand(profile, repeats=repeats)}


def test_the_cells_a_claim_compares_are_read_from_the_claims_definitions():
    settings = compared_settings()
    assert {("pytorch", "eager", "off"), ("mindspore", "graph", "off"), ("mindspore", "pynative", "off"),
            ("pytorch", "eager", "O2"), ("mindspore", "graph", "O2"), ("mindspore", "graph", "O3")} == settings


def test_claim_cells_get_the_profiles_claim_repeats_and_the_others_its_repeats():
    quick = _repeats("quick")
    assert quick["model/gcn/pytorch/eager/amp-off/1dev"] == 2
    assert quick["model/gru/mindspore/graph/amp-O3/1dev"] == 2
    assert quick["model/gcn/mindspore/pynative/amp-O2/1dev"] == 1       # no claim compares PyNative at O2
    assert quick["scaling/resnet50/pytorch/eager/amp-off/2dev"] == 1
    assert {n for c, n in quick.items() if c.startswith(("operator/", "inference/", "passes/"))} == {1}
    assert set(_repeats("target").values()) == {3}
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
