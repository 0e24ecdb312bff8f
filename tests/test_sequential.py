"""Sequential repeats (harness/launch/sequential.py): the rule on known ratios, which comparisons ask for more, the
runner's rounds, and the knobs of `harness run` and reproduce.sh."""

import json
import subprocess

import pytest

from harness.claims.common import CONTRADICTS, NOT_MEASURED, SUPPORTS, Claim, Part
from harness.claims.paper import INCONCLUSIVE
from harness.config import matrix as matrix_mod
from harness.launch import sequential
from tests.helpers import REPO, harness, write_matrix

TRIALS = 200


def test_a_large_effect_is_decided_at_two_repeats_and_never_wrongly():
    for ratio, cv in ((2.9, 0.05), (0.4, 0.10), (0.1, 0.10)):
        got = sequential.simulate(ratio, cv, 2, 3, TRIALS, seed=5)
        assert got["wrong"] == 0.0 and got["inconclusive"] == 0.0, (ratio, cv, got)
        assert got["mean_repeats"] <= 2.05, (ratio, cv, got)


@pytest.mark.parametrize("ratio", [0.97, 1.0, 1.03])
def test_stopping_early_does_not_inflate_wrong_verdicts_beyond_the_fixed_design_at_the_cap(ratio):
    """A true tie (within ±5%) with 10% noise: the rule's wrong conclusive verdicts stay within EARLY_ERROR (plus
    simulation noise) of a fixed design of 3 repeats, and well below the old fixed design of 2 repeats."""
    seq = sequential.simulate(ratio, 0.10, 2, 3, TRIALS, seed=7)
    fixed3 = sequential.simulate(ratio, 0.10, 3, 3, TRIALS, seed=8, sequential=False)
    fixed2 = sequential.simulate(ratio, 0.10, 2, 2, TRIALS, seed=9, sequential=False)
    noise = 3 * (0.1 * 0.9 / TRIALS) ** 0.5
    assert seq["wrong"] <= fixed3["wrong"] + sequential.EARLY_ERROR + noise, (seq, fixed3)
    assert seq["wrong"] < fixed2["wrong"], (seq, fixed2)


def test_the_widening_at_two_repeats_brings_the_edge_miss_from_one_in_six_to_early_error():
    """At 2 repeats a side the plain interval misses a true ratio on a band edge, on the wrong side, 1 time in 6
    (the two ranges fail to overlap: 2/C(4,2), half of it on each side); widened by WIDEN[2] it settles wrongly at
    most EARLY_ERROR of the time (within simulation noise)."""
    import numpy as np

    from harness.results import measure
    rng = np.random.default_rng(3)
    plain = widened = 0
    draws = 1500
    for _ in range(draws):
        iv = measure.ratio_interval(measure.Sample(tuple(rng.lognormal(np.log(1.05), 0.1, 2))),
                                    measure.Sample(tuple(rng.lognormal(0, 0.1, 2))))
        plain += iv[0] > 1.05
        widened += sequential.widened(iv, sequential.widen_factor(2))[0] > 1.05
    assert abs(plain / draws - 1 / 6) < 0.03
    assert widened / draws <= sequential.EARLY_ERROR + 0.012


def _claim(cid, *parts):
    return Claim(cid, "t", "p", "mixed", "r", parts=list(parts))


def test_requests_name_the_unsettled_comparisons_and_only_their_cells_below_the_cap():
    a, b = "model/x/pytorch/eager/amp-off/1dev", "model/x/mindspore/graph/amp-off/1dev"
    c = "model/y/pytorch/eager/amp-off/1dev"
    claims = [_claim("C1", Part("across", INCONCLUSIVE, "d", [a, b], (0.9, 1.2)),
                     Part("far", SUPPORTS, "d", [a, c], (2.5, 3.0)),           # settles at 2: far from the band
                     Part("near", CONTRADICTS, "d", [b, c], (1.06, 1.2)),      # conclusive, but not widened
                     Part("missing", NOT_MEASURED, "d"))]
    got = sequential.requests(claims, {a: 2, b: 2, c: 2}, cap=3, runnable={a, b, c})
    assert [(r.part, r.cells) for r in got] == [("across", (a, b)), ("near", (b, c))]
    assert "across an edge of the tie band" in got[0].why() and "widened" in got[1].why()
    assert sequential.requests(claims, {a: 3, b: 3, c: 3}, cap=3, runnable={a, b, c}) == []     # at the cap
    assert [r.cells for r in sequential.requests(claims, {a: 2, b: 3, c: 2}, 3, {a, b, c})] == [(a,), (c,)]
    assert sequential.requests(claims, {a: 2, b: 2, c: 2}, 3, runnable={c}) == [
        sequential.Request("C1", "near", CONTRADICTS, (1.06, 1.2), 2, (c,))]   # cells outside the run never run


def test_claim_states_say_pending_waiting_or_the_verdict():
    a = "model/x/pytorch/eager/amp-off/1dev"
    claims = [_claim("C1", Part("p", INCONCLUSIVE, "d", [a], (0.9, 1.2))),
              _claim("C2", Part("q", NOT_MEASURED, "d")), _claim("O1", Part("o", SUPPORTS, "d", [a], (2, 3)))]
    got = sequential.states(claims, {a: 2}, 3, unfinished_kinds={"model"})
    assert got == {"C1": sequential.WAITING, "C2": sequential.PENDING, "O1": "mixed"}
    assert sequential.states_line(got).startswith("verdicts (1 of 3 decided): C1 waiting for repeats")


def test_the_profiles_cap_and_the_overrides():
    m = matrix_mod.load(None)
    assert (m.max_repeats("quick"), m.max_repeats("target"), m.max_repeats("full")) == (2, 3, 3)
    assert m.max_repeats("quick", cap=5) == 5
    assert m.max_repeats("target", repeats=4) == 4            # never below the minimum --repeats sets
    assert m.max_repeats("target", repeats=1) == 3
    from harness.errors import HarnessError
    with pytest.raises(HarnessError, match="--max-repeats 0"):
        m.max_repeats("target", cap=0)


def test_the_matrix_check_refuses_a_cap_below_the_minimum(tmp_path):
    m = write_matrix(tmp_path / "m.toml")
    m.write_text(m.read_text().replace("repeats = 1\ntimeout_s", "repeats = 1\nclaim_repeats = 3\nmax_repeats = 2\n"
                                                                 "timeout_s"))
    p = harness("list", "--matrix", m)
    assert p.returncode == 2 and "max_repeats >= claim_repeats" in p.stderr


def test_a_run_adds_rounds_only_for_unsettled_comparisons_up_to_the_cap(tmp_path, monkeypatch):
    m = write_matrix(tmp_path / "m.toml", epochs=3, frameworks=("pytorch", "mindspore"), modes=("eager", "graph"))
    m.write_text(m.read_text().replace("repeats = 1\ntimeout_s", "repeats = 1\nclaim_repeats = 2\nmax_repeats = 3\n"
                                                                 "timeout_s"))
    out = tmp_path / "run"
    monkeypatch.setenv("HARNESS_COMMAND", "./reproduce.sh cpu --synthetic")
    monkeypatch.setenv("HARNESS_DATA_MIRROR", "http://127.0.0.1:8000/data")
    p = harness("run", "--platform", "cpu", "--out", out, "--synthetic", "--matrix", m)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["invocations"][0]["command"] == "./reproduce.sh cpu --synthetic"
    assert meta["invocations"][0]["data_mirror"] == "http://127.0.0.1:8000/data"   # where its data would come from
    assert meta["invocations"][0]["max_repeats"] == 3
    assert "estimate:" in p.stderr and "verdicts (" in p.stderr
    repeats = {}
    for f in (out / "cells").rglob("r[0-9].json"):
        cell = str(f.parent.relative_to(out / "cells"))
        repeats[cell] = repeats.get(cell, 0) + 1
    asked = {c for rnd in meta["rounds"] for r in rnd["requests"] for c in r["cells"]}
    for cell, n in repeats.items():
        assert n == (3 if cell in asked else 2), (cell, n, meta["rounds"])
    for rnd in meta["rounds"]:
        for r in rnd["requests"]:
            assert r["why"] in p.stderr


def test_reproduce_sh_passes_repeats_and_the_cap_through():
    p = subprocess.run([str(REPO / "reproduce.sh"), "cpu", "--repeats", "3", "--max-repeats", "4", "--dry-run",
                        "--synthetic"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert "--repeats 3 --max-repeats 4" in p.stdout
    bad = subprocess.run([str(REPO / "reproduce.sh"), "cpu", "--max-repeats", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--max-repeats needs a whole number" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_estimate_reads_the_reference_runs_cell_times_extra_rounds_and_time_outside_cells(tmp_path):
    from harness.config.cell import Cell
    from harness.estimate import runtime as estimate
    from harness.results.store import RunStore, write_json_atomic

    ref = tmp_path / "runs" / "cpu-quick"
    store = RunStore(ref)
    a, b = "model/x/pytorch/eager/amp-off/1dev", "model/x/mindspore/graph/amp-off/1dev"
    for cell, times in ((a, (10.0, 12.0, 11.0)), (b, (20.0, 20.0))):
        for k, t in enumerate(times):
            store.write_result(cell, k, {"schema": 2, "cell": cell, "repeat": k, "status": "ok", "elapsed_s": t})
    # 73 s of cells (3 + 2 runs), 100 s of wall time: 27 s outside the cells; a's third run was an extra round.
    write_json_atomic(ref / "run.json", {"schema": 2, "platform": "cpu", "profile": "quick", "invocations": [
        {"started_at": "2026-11-26T00:00:00+00:00", "finished_at": "2026-11-26T00:01:40+00:00"}],
        "rounds": [{"runs": [[a, 2]]}]})
    write_json_atomic(ref / "env.json", {"cpu": {"model": "Test CPU", "cores": 2}})

    def cell(cid):
        return Cell(id=cid, kind="model", model="x", framework="f", mode="m", amp="off", devices=1, repeats=2,
                    timeout_s=1, seed=0, spec=None)
    todo = [(cell(a), 0), (cell(a), 1), (cell(b), 0), (cell(b), 1)]
    got = estimate.plan(todo, ref)
    assert got["cells"] == 2 * 11.0 + 2 * 20.0 and got["extra"] == 11.0 and got["extra_runs"] == 1
    assert abs(got["outside"] - 27.0 * (62.0 + 11.0) / 73.0) < 1e-9
    line = estimate.line(todo, "quick", "cpu", 3, runs=tmp_path / "runs")
    assert line.startswith("estimate: about 1 min 40 s for 4 runs and the 1 more repeats")
    assert "Test CPU, 2 cores" in line
    assert "no reference run" in estimate.line(todo, "target", "cpu", 3, runs=tmp_path / "runs")
