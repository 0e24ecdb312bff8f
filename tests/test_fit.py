"""A run planned to the hours booked (harness.estimate.fit, harness.launch.booking): the claims' parts first and the
cheapest of them first, what is left out said with its reason, the re-plan from the run's own cells, and the run under
`--hours` end to end (an in-process run whose cells take the time a fake clock says)."""

from __future__ import annotations

import contextlib
import io
import json
import types

import pytest

from harness import cli
from harness.claims import reads
from harness.config import matrix as matrix_mod
from harness.estimate import fit
from harness.host import envinfo
from harness.launch import booking, runner
from tests.helpers import write_matrix


def _cells(profile="quick", only=None):
    return matrix_mod.load().expand(profile, only)


def _priced(cells, seconds):
    """Every (cell, repeat) at `seconds(cell)` a repeat."""
    return [fit.Entry(c, r, seconds(c)) for c, _ in [(c, 0) for c in cells] for r in range(c.repeats)]


def test_the_parts_read_the_rules_own_cells():
    cells = _cells(only="model/gcn/*,model/gru/*")
    needs = {n.name: n for n in reads.needs(cells)}
    assert set(needs["C1 on gcn"].cells) == {"model/gcn/pytorch/eager/amp-off/1dev",
                                             "model/gcn/mindspore/graph/amp-off/1dev"}
    assert set(needs["C4 on gru"].cells) == {"model/gru/mindspore/pynative/amp-off/1dev",
                                             "model/gru/mindspore/graph/amp-off/1dev",
                                             "model/gru/pytorch/eager/amp-off/1dev"}
    assert {"model/gcn/mindspore/graph/amp-O3/1dev", "model/gcn/pytorch/eager/amp-O2/1dev"} <= set(
        needs["C3 on gcn"].cells)
    # the operators: O1 per operator, O2 on BatchNorm2d, O3 on Conv2d, PyTorch eager against MindSpore GRAPH
    ops = {n.name for n in reads.needs(_cells(only="operator/*"))}
    assert ops == {"O1 on conv2d", "O1 on linear", "O1 on batchnorm2d", "O2 on batchnorm2d", "O3 on conv2d"}
    assert not any("pynative" in c for n in reads.needs(_cells(only="operator/*")) for c in n.cells)


def test_the_cheapest_parts_are_decided_first_and_the_rest_say_why():
    cells = _cells(only="model/gcn/*,model/gru/*")
    cost = {"gcn": 10.0, "gru": 100.0}
    entries = _priced(cells, lambda c: cost[c.model])
    needs = reads.needs(cells)
    gcn_parts = sum(1 for n in needs if n.subject == "gcn")
    # enough for every GCN cell at its repeats, not for the GRU's C1
    budget = sum(e.seconds for e in entries if e.cell.model == "gcn") + 150
    f = fit.fit(entries, needs, budget, hours=1, skipped={}, cap=3)
    assert len([n for n in f.decided if n.subject == "gcn"]) == gcn_parts
    assert not [n for n in f.decided if n.subject == "gru"]
    why = dict((n.name, w) for n, w in f.undecided)
    assert why["C1 on gru"].startswith("its cells need 6 min 40 s more at the upper bound")
    assert f.planned_s <= budget
    lines = "\n".join(f.lines())
    assert "C1: decided on gcn; not on gru (its cells need" in lines
    # the cells of the parts not decided are left out, each with its reason, and are never in the run
    assert f.left["model/gru/pytorch/eager/amp-off/1dev"] == "left out to fit 1 h: C1 on gru not decided"
    assert not {e.cell.id for e in f.first + f.late} & set(f.left)


def test_a_part_whose_cells_the_host_skips_is_not_decided_and_says_the_skip():
    cells = _cells(only="model/resnet50/*,scaling/*")
    skipped = {c.id: "needs 2 devices on each host, the host shows 1" for c in cells if c.kind == "scaling"}
    f = fit.fit(_priced([c for c in cells if c.id not in skipped], lambda c: 1.0), reads.needs(cells), 1e6,
                hours=8, skipped=skipped)
    c5 = [line for line in fit.claim_lines(f.decided, f.undecided) if line.startswith("C5")]
    assert c5 and c5[0].startswith("C5: not decided: resnet50 at 2 devices, AMP off")
    assert "cells skipped here: needs 2 devices on each host, the host shows 1)" in c5[0]


def test_companion_cells_come_after_the_tables_and_the_repeats():
    cells = _cells(only="model/gcn/*,inference/*,passes/*")
    entries = _priced(cells, lambda c: 5.0)
    f = fit.fit(entries, reads.needs(cells), 1e6, hours=8, skipped={}, cap=3)
    assert {f.tier[e.cell.id] for e in f.late} == {"companion"}
    assert [f.tier[e.cell.id] for e in f.first] == sorted((f.tier[e.cell.id] for e in f.first),
                                                          key=fit.TIERS.index)
    # the repeats' share is taken before the companion cells: a budget that holds the first two tiers and the repeats
    # but not the companion cells leaves those out
    first = sum(e.seconds for e in f.first)
    g = fit.fit(entries, reads.needs(cells), first + f.repeats_s + 1, hours=8, skipped={}, cap=3)
    assert g.late == [] and g.left and all("a companion study's cell" in w for c, w in g.left.items())


def test_a_run_nothing_prices_is_at_its_timeout_and_named():
    cells = _cells(only="model/gcn/pytorch/*")
    p = {"how": {c.id: "none" for c in cells}, "bounds": {"high": (None, 0.0)}, "outside": 0.0, "cells": 0.0,
         "extra": 0.0}
    es = fit.entries([(c, 0) for c in cells], p)
    assert all(not e.known and e.seconds == e.cell.timeout_s > 0 for e in es)
    f = fit.fit(es, reads.needs(cells), 1e6, hours=8, skipped={})
    assert "priced at their timeout, nothing measured prices them: model/gcn/pytorch" in "\n".join(f.lines())


def test_the_clock_prices_from_the_runs_own_cells_and_drops_the_lowest_priority_first():
    cells = _cells(only="model/gcn/*,inference/*")
    entries = _priced(cells, lambda c: 10.0)
    f = fit.fit(entries, reads.needs(cells), 1e6, hours=1, skipped={}, cap=2)
    t = [0.0]
    clock = fit.Clock(f, deadline=400.0, now=lambda: t[0])
    runs = [(e.cell, e.repeat) for e in f.first + f.late]
    first = runs[0]
    clock.measured(*first, 30.0)          # three times its price
    assert clock.price(*first) == 30.0    # its own cell: what it measured
    same_model = next((c, r) for c, r in runs if c.model == first[0].model and c.id != first[0].id)
    assert clock.price(*same_model) == pytest.approx(30.0)   # scaled by its nearest cell's measured/priced
    t[0] = 100.0
    dropped, line = clock.replan(runs[1:])
    rest = sum(clock.price(c, r) for c, r in runs[1:] if c.id not in clock.dropped)
    assert dropped and rest <= 300.0
    assert line.startswith("re-planned: the ") and "left out" in line
    tiers = [f.tier[c] for c in dropped]
    assert tiers[0] == "companion"    # the lowest priority first
    assert all(f.left[c].endswith("when the run re-planned") for c in dropped)
    # a run whose price would end past the deadline does not start
    t[0] = 390.0
    assert not clock.fits(*runs[-1])


def test_hours_and_the_booking_start_are_checked_in_one_line(capsys, monkeypatch, tmp_path):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--platform", "cpu", "--out", str(tmp_path / "r"), "--hours", "-1"])
    assert e.value.code == 2
    assert "--hours: '-1' is not a number of hours above 0 (e.g. 8 or 7.5)" in capsys.readouterr().err
    monkeypatch.setenv(booking.START, "soon")
    with pytest.raises(Exception) as e:
        booking.started()
    assert "HARNESS_BOOKING_START='soon' is not a time in seconds since the epoch" in str(e.value)
    monkeypatch.setenv(booking.START, "1000")
    assert booking.started(now=2000.0) == 1000.0
    monkeypatch.setenv(booking.START, "99999")
    with pytest.raises(Exception, match="is in the future"):
        booking.started(now=2000.0)


def test_a_run_under_hours_replans_and_its_report_lists_what_it_left_out(tmp_path, monkeypatch):
    """Every cell takes 10 s of a fake clock where the plan priced it at about 1 s (the committed quick run's GCN
    cells): after the first, the re-plan drops what no longer fits, and no cell starts past the hours."""
    now = [1_000_000.0]
    fake_time = types.SimpleNamespace(time=lambda: now[0])
    monkeypatch.setattr(fit, "time", fake_time)
    monkeypatch.setattr(booking, "time", fake_time)
    monkeypatch.setenv(booking.START, str(now[0]))
    started = []

    def fake_child(store, cell, repeat, platform, folders, synthetic, shim, node, log=None, turns=None,
                   accumulation_steps=1):
        started.append(now[0])
        now[0] += 10.0
        return runner._base(cell, repeat, platform, synthetic) | {"status": "ok", "elapsed_s": 10.0,
                                                                   "mean_throughput_other_epochs": 1.0}

    monkeypatch.setattr(runner, "_run_child", fake_child)
    monkeypatch.setattr(envinfo, "capture", lambda probe_frameworks=True: {"hostname": "test"})
    monkeypatch.setattr(envinfo, "cpu_model", lambda: "AMD EPYC")   # priced from cpu-quick on any host's CPU
    matrix = write_matrix(tmp_path / "m.toml", epochs=2, frameworks=("pytorch", "mindspore"),
                          modes=("eager", "graph", "pynative"))
    out = tmp_path / "run"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["run", "--platform", "cpu", "--matrix", str(matrix), "--out", str(out), "--synthetic",
                       "--hours", str(35 / 3600)])
    said = err.getvalue()
    assert rc == 0, said
    assert "planned for 0.00972222 h" in said and "re-planned: the " in said
    meta = json.loads((out / "run.json").read_text())
    b = meta["booking"]
    assert b["replans"] and b["left"]
    deadline = b["deadline"]
    assert all(t < deadline for t in started) and now[0] <= deadline + 10.0
    results = [json.loads(p.read_text()) for p in (out / "cells").rglob("r*.json")]
    left = [r for r in results if r["status"] == "skipped"]
    assert left and all(r["reason"].startswith("left out to fit 0.00972222 h") for r in left)
    assert cli.main(["report", str(out)]) == 0
    html = (out / "report" / "report.html").read_text()
    assert 'id="booking">planned for 0.00972222 h booked' in html
    assert f"{len(b['left'])} cell(s) left out to fit" in html or "cell(s) left out to fit" in html


def test_the_quick_profile_plans_itself_to_its_goal_on_an_accelerator(monkeypatch, tmp_path):
    """On a GPU or NPU host the quick profile's own 15 minutes (matrix.toml accelerator_hours) plan the run as
    --hours 0.25 would, counted from the run's start (not $HARNESS_BOOKING_START, which a build may have used up);
    on a CPU it does not."""
    from harness.config.matrix import load
    from harness.devices import query as devicequery
    from harness.host import platforms

    assert load().profile("quick")["accelerator_hours"] == 0.25
    monkeypatch.setattr(platforms, "visible_devices", lambda platform: 1)
    monkeypatch.setattr(devicequery, "host_memory", lambda platform: (80.0, "faked"))
    monkeypatch.setattr(envinfo, "capture", lambda: {})
    monkeypatch.setenv(booking.START, "1")   # long ago: it would leave no time at all
    monkeypatch.setattr(runner, "_run_child", lambda store, cell, repeat, *a: runner._base(
        cell, repeat, "cuda", True) | {"status": "ok", "elapsed_s": 1.0})
    said = []
    out = tmp_path / "run"
    assert runner.run(load(), "quick", "cuda", out, only="model/gcn/pytorch/*", synthetic="all",
                      log=said.append) == 0
    assert any(line.startswith("planned for 0.25 h") for line in said)
    b = json.loads((out / "run.json").read_text())["booking"]
    assert b["hours"] == 0.25 and b["deadline"] - b["started_at"] == 900 and b["started_at"] > 1e9
    assert not b["left"]   # GCN's PyTorch cells fit 15 minutes
    cpu = tmp_path / "cpu"
    monkeypatch.setattr(runner, "_run_child", lambda store, cell, repeat, *a: runner._base(
        cell, repeat, "cpu", True) | {"status": "ok", "elapsed_s": 1.0})
    monkeypatch.delenv(booking.START)
    assert runner.run(load(), "quick", "cpu", cpu, only="model/gcn/pytorch/*", synthetic="all",
                      log=said.append) == 0
    assert "booking" not in json.loads((cpu / "run.json").read_text())
