"""Timing by turns (harness.scenarios.operator.turns): the pipes' protocol between the runner and a group's children,
the paired ratio it gives (harness.results.measure.OpConfig), and a run whose operator configurations take turns."""

from __future__ import annotations

import math
import os
import threading

import numpy as np
import pytest
from scipy import stats

from harness.errors import HarnessError
from harness.results import measure
from harness.scenarios.operator import turns


def _members(group: turns.Group, rounds: int, log: list,
             fail_at: dict | None = None) -> tuple[list[threading.Thread], dict[int, str]]:
    """One thread per member taking turns (a child's side), each block logging its member; `fail_at` {member: n}:
    that member's block n+1 raises, as an operator that fails would."""
    errors: dict[int, str] = {}

    def member(k: int) -> None:
        spec = group.spec(k) | {"rounds": rounds}

        def block() -> float:
            if fail_at and fail_at.get(k) == len([x for x in log if x == k]):
                raise RuntimeError("this cell's operator failed")
            log.append(k)
            return 0.001 * (k + 1)

        try:
            taken = turns.take_turns(spec, block)
            assert taken["times"] == [0.001 * (k + 1)] * rounds
            assert len(taken["probe_s"]) == rounds and all(p > 0 for p in taken["probe_s"])
        except (HarnessError, RuntimeError) as e:
            errors[k] = str(e)

    threads = [threading.Thread(target=member, args=(k,), daemon=True) for k in range(group.size)]
    for th in threads:
        th.start()
    return threads, errors


def test_a_group_takes_one_block_each_in_turn_after_all_are_ready(tmp_path):
    group = turns.prepare(tmp_path / "g", 3, "linear fp32 fwd batch64 r0")
    coordinator = turns.Coordinator(group)
    log: list[int] = []
    threads, errors = _members(group, 4, log)
    assert coordinator.wait_ready(lambda: True)
    coordinator.start()
    for th in threads:
        th.join(10)
    coordinator.close()
    assert not errors and log == [0, 1, 2] * 4, "round by round, in the group's order"
    assert not (tmp_path / "g").exists(), "the pipes go with the coordinator"


def test_a_partner_that_ends_stops_the_others_with_a_reason(tmp_path):
    group = turns.prepare(tmp_path / "g", 2, "conv2d r1")
    coordinator = turns.Coordinator(group)
    log: list[int] = []
    threads, errors = _members(group, 5, log, fail_at={1: 2})   # cell 1 fails at its third block
    assert coordinator.wait_ready(lambda: True)
    coordinator.start()
    threads[1].join(10)
    assert not threads[1].is_alive() and "operator failed" in errors[1]
    coordinator.abort()   # what the runner does when one member has ended and another has not
    threads[0].join(10)
    coordinator.close()
    assert "stopped by the runner after 3 of 5 blocks" in errors[0] and "--resume" in errors[0]


def test_the_runner_stops_the_others_only_for_a_member_that_ended_before_its_last_block(tmp_path):
    # three members ending in turn after their last blocks: the later ones still time theirs, nobody is stopped
    group = turns.prepare(tmp_path / "g", 3, "linear r0")
    coordinator = turns.Coordinator(group)
    log: list[int] = []
    threads, errors = _members(group, 6, log)
    coordinator.supervise(threads, poll_s=0.01)
    assert not errors and log == [0, 1, 2] * 6 and coordinator.finished() == 3 and not coordinator.aborted
    coordinator.close()
    # one member failing at its third block: the runner stops the other instead of leaving it to wait for its turn
    group = turns.prepare(tmp_path / "h", 2, "linear r1")
    coordinator = turns.Coordinator(group)
    threads, errors = _members(group, 5, [], fail_at={1: 2})
    coordinator.supervise(threads, poll_s=0.01)
    coordinator.close()
    assert coordinator.aborted and "operator failed" in errors[1] and "stopped by the runner after 3 of 5" in errors[0]


def test_each_member_sizes_its_block_on_its_first_turn_alone_before_any_block_is_timed(tmp_path):
    """The sizing round: every member sizes while it holds the turn (nobody else computes), in the group's order,
    and only then does the first timed round start; the sizing is not a timed block."""
    group = turns.prepare(tmp_path / "g", 3, "bn r0")
    coordinator = turns.Coordinator(group)
    log: list = []
    busy = threading.Lock()   # held by whoever is computing; a second one computing at once fails to take it

    def member(k: int, out: dict) -> None:
        def size() -> None:
            assert busy.acquire(blocking=False), "sized while another member computed"
            log.append(f"size{k}")
            busy.release()

        def block() -> float:
            assert busy.acquire(blocking=False), "timed while another member computed"
            log.append(k)
            busy.release()
            return 0.001

        out[k] = turns.take_turns(group.spec(k) | {"rounds": 2}, block, size=size)

    taken: dict = {}
    threads = [threading.Thread(target=member, args=(k, taken), daemon=True) for k in range(3)]
    for th in threads:
        th.start()
    coordinator.supervise(threads, poll_s=0.01)
    coordinator.close()
    assert log == ["size0", "size1", "size2", 0, 1, 2, 0, 1, 2]
    assert all(len(taken[k]["times"]) == 2 and len(taken[k]["probe_s"]) == 2 for k in range(3))


def test_an_operator_block_by_turns_is_sized_in_the_sizing_round_and_each_block_follows_one_untimed_iteration(
        tmp_path, monkeypatch):
    from harness.scenarios.operator import ops as operators

    calls: list[str] = []
    monkeypatch.setattr(operators, "block_size", lambda *a, **k: calls.append("size") or 3)
    monkeypatch.setattr(operators, "one_block", lambda run, sync, n: calls.append(f"block{n}") or 0.002)

    def fake_turns(spec, block, size=None):
        size()
        return {"times": [block(), block()], "probe_s": [1e-4, 1e-4]}

    monkeypatch.setattr(turns, "take_turns", fake_turns)
    spec = {"group": "g", "position": 0, "cells": 2, "rounds": 2}
    out = operators.turn_time(lambda: calls.append("run"), lambda: calls.append("sync"), spec, min_block_s=0.02)
    assert calls == ["size", "run", "sync", "block3", "run", "sync", "block3"]
    assert out["block_size"] == 3 and out["blocks"] == 2 and out["times_s"] == [0.002, 0.002]


def test_the_coordinator_gives_up_waiting_when_a_member_ends_before_it_is_ready(tmp_path):
    group = turns.prepare(tmp_path / "g", 2, "bn r0")
    coordinator = turns.Coordinator(group)
    assert coordinator.wait_ready(lambda: False, poll_s=0.01) is False
    coordinator.close()


def _turn_results(op_record: dict, rounds_ms: list[np.ndarray], rounds_pt: list[np.ndarray]) -> measure.OpConfig:
    results = []
    for k, (ms, pt) in enumerate(zip(rounds_ms, rounds_pt, strict=True)):
        for fw, mode, times in (("mindspore", "graph", ms), ("pytorch", "eager", pt)):
            fast = float(measure.fast_time(times))
            cell = f"operator/linear/{fw}/{mode}/fp32/fwd/batch64"
            results.append({**op_record, "cell": cell, "framework": fw, "mode": mode, "repeat": k,
                            "block_times_s": list(times), "fast_s": fast, "median_s": float(np.median(times)),
                            "throughput": 64 / fast, "turns": {"group": f"g{k}", "position": 0, "cells": 2,
                                                               "rounds": len(times)}})
    (config,) = measure.operator_ratios(measure.summarise(results))
    return config


def test_cells_timed_by_turns_give_the_ratio_round_by_round_and_phases_cancel():
    """Both sides in the same slow phases (every third round 1.7x slower for both): each round's ratio is the same,
    so the ratio and its interval are exact, where the two cells' own spreads would have given a wide one."""
    record = {"kind": "operator", "status": "ok", "op": "linear", "dtype": "fp32", "direction": "fwd",
              "shape": {"batch": 64}, "params": 100, "platform": "cpu"}
    phase = np.asarray([1.7 if i % 3 == 0 else 1.0 for i in range(40)])
    config = _turn_results(record, [phase * 0.002, phase * 0.002], [phase * 0.001, phase * 0.001])
    assert config.ratio("graph") == pytest.approx(0.5)
    lo, hi = config.ratio_interval("graph")
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
    # Two groups that disagree (the processes of the second ran MindSpore 20% slower): the groups are the units, the
    # ratio their geometric mean and the interval Student's t over them (1 degree of freedom): far wider than the
    # two groups' range, which is what the next run's ratio falls outside of; more groups narrow it.
    config = _turn_results(record, [phase * 0.002, phase * 0.0024], [phase * 0.001, phase * 0.001])
    logs = np.log([0.5, 0.5 / 1.2])
    assert config.ratio("graph") == pytest.approx(math.exp(logs.mean()))
    lo, hi = config.ratio_interval("graph")
    half = stats.t.ppf(0.975, 1) * logs.std(ddof=1) / math.sqrt(2)
    assert (lo, hi) == (pytest.approx(math.exp(logs.mean() - half), rel=0.01),
                        pytest.approx(math.exp(logs.mean() + half), rel=0.01))
    assert lo < 0.5 / 1.2 * 0.8 and hi > 0.5 * 1.2
    four = _turn_results(record, [phase * 0.002, phase * 0.0024, phase * 0.002, phase * 0.0024], [phase * 0.001] * 4)
    lo4, hi4 = four.ratio_interval("graph")
    assert lo < lo4 < 0.5 / 1.2 and 0.5 < hi4 < hi


def test_one_turn_group_resamples_its_rounds_whole():
    """One group says nothing about the spread between processes: its interval resamples its rounds, both blocks of
    a round together, each side at the 10th percentile of the drawn blocks (as the group's own figure)."""
    record = {"kind": "operator", "status": "ok", "op": "linear", "dtype": "fp32", "direction": "fwd",
              "shape": {"batch": 64}, "params": 100, "platform": "cpu"}
    rng = np.random.default_rng(0)
    ms, pt = 0.002 * rng.lognormal(0, 0.05, 40), 0.001 * rng.lognormal(0, 0.05, 40)
    config = _turn_results(record, [ms], [pt])
    point = float(measure.fast_time(pt) / measure.fast_time(ms))
    assert config.ratio("graph") == pytest.approx(point)
    lo, hi = config.ratio_interval("graph")
    assert lo < point < hi and hi / lo < 1.2
    assert config.ratio_interval("graph") == (lo, hi)   # seeded: the same blocks, the same interval


def test_confine_moves_every_thread_of_the_process_not_only_the_caller():
    # An import leaves threads of its own; a group's child imports its framework on any core, then confines them all
    from harness.launch import child

    before = os.sched_getaffinity(0)
    stop = threading.Event()
    started: list[int] = []

    def idle() -> None:
        started.append(threading.get_native_id())
        stop.wait(10)

    th = threading.Thread(target=idle, daemon=True)
    th.start()
    while not started:
        pass
    one = [min(before)]
    try:
        child.confine(one)
        assert sorted(os.sched_getaffinity(started[0])) == one, "a thread started before the call"
        assert child.process_cores() == one
    finally:
        stop.set()
        th.join(10)
        os.sched_setaffinity(0, before)
