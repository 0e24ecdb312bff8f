"""An operator ratio's interval (each cell's processes and, within them, blocks resampled), the tie rule
(an interval within ±5% of 1 is a tie), the blocks' minimum length in iterations, and the repeats operator cells get."""

from __future__ import annotations

import numpy as np
import pytest

from harness.claims import INCONCLUSIVE, TIE_RATIO
from harness.config import cellid, matrix
from harness.results import measure
from harness.scenarios.operator import ops as operators
from tests.helpers import claim, op_result, paper_world, quick_pynative_matrix

BATCH = 16


def timed(record: dict, blocks_per_process: list[list[float]]) -> list[dict]:
    """One operator result per process (repeat), its block times the given factors of the time its throughput
    implies, its median and throughput those of its own blocks."""
    base = BATCH / record["throughput"]
    out = []
    for k, factors in enumerate(blocks_per_process):
        times = [base * f for f in factors]
        med = float(np.median(times))
        out.append({**record, "repeat": k, "block_times_s": times, "median_s": med, "throughput": BATCH / med})
    return out


def cell(records: list[dict]) -> measure.Repeats:
    s = measure.Repeats(records[0]["cell"])
    for r in records:
        s.add(r)
    return s


TIGHT = [[1.0, 1.001, 0.999, 1.0, 1.002, 0.998, 1.0]]


def test_block_replicates_resample_processes_as_well_as_blocks():
    r = op_result("linear", "pytorch", "eager", 100, 1000.0)
    one = measure.block_replicates(cell(timed(r, TIGHT)))
    two_alike = measure.block_replicates(cell(timed(r, TIGHT * 2)))
    two_apart = measure.block_replicates(cell(timed(r, [TIGHT[0], [2 * f for f in TIGHT[0]]])))
    width = [np.ptp(measure.replicate_interval(x)) / np.median(x) for x in (one, two_alike, two_apart)]
    assert width[0] < 0.01 and width[1] < 0.01, "tight blocks in processes that agree: a narrow interval"
    assert width[2] > 0.5, "processes 2x apart: the interval spans them, however tight each one's blocks"
    lo, hi = measure.replicate_interval(two_apart)
    assert lo <= 500.0 * 1.01 and hi >= 1000.0 * 0.99   # throughput 1000 and 500 samples/s, both inside
    again = measure.block_replicates(cell(timed(r, [TIGHT[0], [2 * f for f in TIGHT[0]]])))
    assert (again == two_apart).all(), "seeded: the same blocks give the same replicates"
    assert measure.block_replicates(cell([r])) is None, "no block times kept: no replicates"


def _world_with_small_batchnorm(ms_blocks: list[list[float]], ratio: float) -> dict:
    """The paper's world, its small BatchNorm fp32 configurations (O2's) timed in blocks: PyTorch tight in two
    processes, MindSpore at `ratio` of its throughput with the given block factors."""
    w = paper_world()
    for (cid, rep), r in list(w.items()):
        if r.get("op") != "batchnorm2d" or r["params"] != 32 or r["mode"] == "pynative":
            continue
        del w[(cid, rep)]
        if r["framework"] == "pytorch":
            records = timed(r, TIGHT * 2)
        else:
            records = timed({**r, "throughput": 1000.0 * ratio}, ms_blocks)
        w.update({(x["cell"], x["repeat"]): x for x in records})
    return w


def test_o2_a_ratio_whose_interval_lies_within_the_tie_band_is_a_tie():
    c = claim(_world_with_small_batchnorm(TIGHT * 2, 1.01), "O2")
    assert c.verdict == "contradicted"
    assert all("a tie (within 5%)" in e and "95% interval 1.0" in e for e in c.evidence), c.evidence


def test_o2_an_interval_across_an_edge_of_the_tie_band_is_inconclusive():
    # processes at 1.0x and 1.15x of PyTorch's throughput: the interval reaches from inside the band to above it
    c = claim(_world_with_small_batchnorm([TIGHT[0], [f / 1.15 for f in TIGHT[0]]], 1.0), "O2")
    assert c.verdict == INCONCLUSIVE and all("across the ±5% tie band" in e for e in c.evidence), c.evidence


def test_o2_an_interval_wholly_above_the_band_supports():
    c = claim(_world_with_small_batchnorm(TIGHT * 2, 2.0), "O2")
    assert c.verdict == "supported" and "95% interval 2.00–2.00" in c.evidence[0], c.evidence
    assert TIE_RATIO == 1.05


def test_o3_an_interval_across_the_band_makes_its_part_inconclusive():
    w = paper_world()
    for (cid, rep), r in list(w.items()):
        if r.get("op") == "conv2d" and r["params"] == 147712 and r["mode"] != "pynative":
            del w[(cid, rep)]
            ms = r["framework"] == "mindspore"
            blocks = [TIGHT[0], [f / 1.2 for f in TIGHT[0]]] if ms else TIGHT * 2
            w.update({(x["cell"], x["repeat"]): x for x in timed({**r, "throughput": 1000.0}, blocks)})
    c = claim(w, "O3")
    assert c.verdict == INCONCLUSIVE and "largest 95% interval" in c.evidence[0], c.evidence


def test_a_block_holds_at_least_min_block_iters_iterations():
    calls = {"run": 0}

    def run():
        calls["run"] += 1

    t = operators.blocked_time(run, lambda: None, min_block_s=0.0, min_block_iters=8, min_run_s=0.0, min_blocks=3,
                               warmup=0)
    assert t["block_size"] >= 8 and t["blocks"] == 3
    assert calls["run"] >= 8 * 4   # the sizing block and three timed ones, 8 iterations each at least
    assert set(operators.SWEEP_TIMING) <= {"min_block_s", "min_block_iters", "min_run_s", "min_blocks", "warmup"}


def test_operator_cells_run_the_profiles_claim_repeats():
    cells = matrix.load().expand("quick", only="operator/*")
    assert cells and {c.repeats for c in cells} == {2}
    assert {c.repeats for c in matrix.load().expand("quick", only="operator/*", repeats=1)} == {1}


def test_an_operator_configurations_cells_take_turns_the_configurations_too_and_other_cells_keep_their_repeats_together(
        tmp_path):
    m = matrix.load(quick_pynative_matrix(tmp_path / "m.toml"))
    cells = m.expand("quick", only="operator/linear/*,model/gcn/pytorch/eager/amp-off/*")
    todo = matrix.schedule(cells)
    assert sorted((c.id, r) for c, r in todo) == sorted((c.id, r) for c in cells for r in range(c.repeats))
    model = [i for i, (c, _) in enumerate(todo) if c.kind == "model"]
    assert len(model) == 2 and model[1] == model[0] + 1, "a model cell's repeats run one after the other"
    ops = [(c, r) for c, r in todo if c.kind == "operator"]
    where_ops = [i for i, (c, _) in enumerate(todo) if c.kind == "operator"]
    assert where_ops == list(range(where_ops[0], where_ops[0] + len(ops))), "the operator cells run as one block"
    configs = [cellid.configuration(c.id) for c, _ in ops]
    assert len(set(configs)) >= 2
    # groups: consecutive entries of one configuration at one repeat, as the runner forms them
    groups = [(configs[0], ops[0][1], [ops[0][0].id])]
    for (c, r), k in zip(ops[1:], configs[1:], strict=True):
        if (k, r) == groups[-1][:2]:
            groups[-1][2].append(c.id)
        else:
            groups.append((k, r, [c.id]))
    assert [len(g[2]) for g in groups] == [3] * len(groups), "a configuration's 3 cells at one repeat run together"
    assert [r for _, r, _ in groups] == sorted(r for _, r, _ in groups), \
        "every configuration's first group before any configuration's second: a configuration's groups are spread"
    for k in set(configs):
        first, second = [ids for kk, _, ids in groups if kk == k]
        assert sorted(first) == sorted(second) and second == first[1:] + first[:1], "the order rotates"


def test_mindspore_operator_cells_on_cpu_run_without_the_host_queue():
    from harness.frameworks import mindspore as ms_backend
    from harness.frameworks import pytorch as pt_backend

    assert ms_backend.process_env("cpu", "operator")["MS_DEV_HOST_BLOCKING_RUN"] == "1"
    for platform, kind in (("cpu", "model"), ("cpu", "passes"), ("ascend", "operator"), ("cuda", "operator")):
        assert "MS_DEV_HOST_BLOCKING_RUN" not in ms_backend.process_env(platform, kind), (platform, kind)
    assert "MS_DEV_HOST_BLOCKING_RUN" not in ms_backend.process_env("cpu"), "a model cell by default"
    assert pt_backend.process_env("cpu", "operator") == pt_backend.process_env("cpu", "model")


def _waiting_thread_in_a_thread(cores: set[int]) -> tuple[int, dict]:
    """_waiting_thread_idle called in a thread of its own confined to `cores` (policy and affinity are per thread:
    the test process's threads keep theirs); that thread's policy afterwards and the settings recorded."""
    import os
    import threading

    from harness.config.context import CellContext
    from harness.scenarios.operator import mindspore as ms_ops

    ctx = CellContext(cell=None, platform="cpu", repeat=0, data_folder=None, synthetic=True)
    seen = {}

    def worker():
        os.sched_setaffinity(0, cores)
        ms_ops._waiting_thread_idle(ctx)
        seen["policy"] = os.sched_getscheduler(0)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    return seen["policy"], ctx.settings


def test_the_waiting_thread_goes_idle_and_only_that_thread():
    import os

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs a host with two cores: on one core the waiting thread keeps its policy")
    policy, settings = _waiting_thread_in_a_thread(set(cores[:2]))
    assert policy == os.SCHED_IDLE and settings["launching_thread"] == "SCHED_IDLE"
    assert os.sched_getscheduler(0) == os.SCHED_OTHER, "the calling thread only"


def test_on_one_core_the_waiting_thread_keeps_its_policy():
    """Confined to one core (the operator cells on CPU) the launching thread computes there: left as it is."""
    import os

    policy, settings = _waiting_thread_in_a_thread({min(os.sched_getaffinity(0))})
    assert policy == os.SCHED_OTHER
    assert settings["launching_thread"].startswith("default policy (one core")


def test_operator_cells_on_cpu_are_confined_to_one_core_and_nothing_else_is():
    import os

    assert operators.CPU_CORES == 1
    assert operators.cpu_cores("cpu", "operator", {5, 3, 9}) == [3], "the first core the runner may use"
    assert operators.cpu_cores("cpu", "operator") == [min(os.sched_getaffinity(0))]
    for platform, kind in (("cpu", "model"), ("cpu", "passes"), ("cpu", "inference"), ("cuda", "operator"),
                           ("ascend", "operator")):
        assert operators.cpu_cores(platform, kind, {0, 1}) is None, (platform, kind)


def test_the_operator_cores_can_be_changed_for_a_run(monkeypatch):
    from harness.errors import HarnessError

    monkeypatch.setenv("HARNESS_OPERATOR_CORES", "2")
    assert operators.cpu_cores("cpu", "operator", {4, 2, 8}) == [2, 4]
    monkeypatch.setenv("HARNESS_OPERATOR_CORES", "all")
    assert operators.cpu_cores("cpu", "operator", {4, 2, 8}) is None, "every core: not confined"
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("HARNESS_OPERATOR_CORES", bad)
        with pytest.raises(HarnessError, match=f"HARNESS_OPERATOR_CORES={bad} is not a number of cores"):
            operators.cpu_cores("cpu", "operator", {0, 1})


def test_mindspore_binds_its_threads_within_the_process_affinity():
    """MindSpore's set_cpu_affinity is given this process's cores on CPU (left to itself it binds to the container's
    cpuset, undoing an operator cell's one core): the ranges it takes."""
    from harness.frameworks import mindspore as ms_backend

    assert ms_backend._core_ranges({0}) == ["0-0"]
    assert ms_backend._core_ranges({5, 0, 1, 2, 7, 8}) == ["0-2", "5-5", "7-8"]


def test_a_bad_operator_core_count_refuses_the_run_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_OPERATOR_CORES": "two"}
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--out", tmp_path / "o",
                        "--synthetic", "--only", "operator/linear/*"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == ("error: HARNESS_OPERATOR_CORES=two is not a number of cores; give one of "
                                f"1-{len(os.sched_getaffinity(0))}, or 'all'")
    assert not (tmp_path / "o").exists(), "refused before the run folder is made"


def test_a_process_with_fast_s_is_taken_at_the_fast_quantile_of_its_blocks():
    """Blocks in two phases (a third of them 1.7x slower, as on the 2-core machine): the process's throughput and its
    replicates are those of the fast phase, where the median of the same blocks would sit between the phases."""
    r = op_result("linear", "pytorch", "eager", 100, 1000.0)
    base = BATCH / 1000.0
    times = [base * (1.7 if k % 3 == 0 else 1.0) * (1 + 0.001 * (k % 5)) for k in range(30)]
    fast = float(measure.fast_time(times))
    rec = {**r, "repeat": 0, "block_times_s": times, "median_s": float(np.median(times)), "fast_s": fast,
           "throughput": BATCH / fast}
    reps = measure.block_replicates(cell([rec, {**rec, "repeat": 1}]))
    lo, hi = measure.replicate_interval(reps)
    assert 995 <= lo <= hi <= 1001 and fast == pytest.approx(base, rel=0.002)


def test_a_wide_operator_ratio_asks_for_one_more_process_of_both_cells_up_to_its_cap():
    from harness.launch import sequential

    class Ratio:   # harness.claims.operators.OpRatio's fields the rule reads
        def __init__(self, ratio, replicates, cells, groups=None):
            self.ratio, self.replicates, self.cells, self.groups = ratio, np.asarray(replicates), cells, groups

    cells = [cellid.operator_id("linear", fw, mode, "fp32", "fwd", {"batch": 64})
             for fw, mode in (("mindspore", "graph"), ("pytorch", "eager"))]
    wide = Ratio(0.5, np.linspace(0.4, 0.6, 101), cells)      # ±20%
    narrow = Ratio(0.5, np.linspace(0.49, 0.51, 101), cells)  # ±2%
    counts = dict.fromkeys(cells, 2)
    asked = sequential.precision_requests([wide, narrow], dict.fromkeys(cells, 3), 4, set(cells))
    assert len(asked) == 1 and asked[0].cells == tuple(cells) and asked[0].n == 3
    assert asked[0].half_width == pytest.approx(0.192) and "wider than ±5%" in asked[0].why()   # 2.5-97.5%
    assert asked[0].to_dict()["claim"] == "Figure 5" and "linear fp32 fwd batch64" in asked[0].why()
    assert sequential.precision_requests([wide], dict.fromkeys(cells, 4), 4, set(cells)) == [], "at the cap"
    assert sequential.precision_requests([wide], counts, 4, {cells[0]}) == [], "one side cannot run: no request"
    # a narrow interval from two processes a side is not yet settled: two groups that agree by chance
    three = dict.fromkeys(cells, sequential.OPERATOR_MIN_REPEATS)
    assert sequential.precision_requests([narrow], three, 4, set(cells)) == []
    asked = sequential.precision_requests([narrow], counts, 4, set(cells))
    assert len(asked) == 1 and asked[0].n == 2 and "fewer than 3 repeats" in asked[0].why()
    assert sequential.precision_requests([narrow], counts, 2, set(cells)) == [], "the cap still holds"
    # timed by turns: the groups the ratio is taken over count, so a group left out (harness.results.hostnoise) is
    # replaced
    left = Ratio(0.5, np.linspace(0.49, 0.51, 101), cells, groups=2)
    asked = sequential.precision_requests([left], three, 4, set(cells))
    assert len(asked) == 1 and asked[0].n == 2
    assert sequential.precision_requests([left], dict.fromkeys(cells, 4), 4, set(cells)) == [], \
        "a group left out counts to the cap"
    # the profile's budget of operator seconds: as many as the rest of it holds (a process about run_s), those under
    # the minimum of groups first, then the widest
    asked = sequential.precision_requests([wide], counts, 4, set(cells))
    assert len(sequential.within_budget(asked, 290.0, 300.0, 4.0)) == 1
    assert sequential.within_budget(asked, 295.0, 300.0, 4.0) == [], "a group of two 4 s processes does not fit in 5 s"
    assert sequential.within_budget(asked, 300.0, 300.0, 0.0) == []
    assert sequential.within_budget(asked, 900.0, None, 4.0) == asked, "no budget: every request"
    other = [cellid.operator_id("conv2d", fw, mode, "fp32", "fwd", {"batch": 16})
             for fw, mode in (("mindspore", "graph"), ("pytorch", "eager"))]
    wider = Ratio(0.5, np.linspace(0.3, 0.7, 101), other)     # ±40%
    both = dict.fromkeys(cells + other, 3)
    got = sequential.within_budget(sequential.precision_requests([wide, wider], both, 4, set(cells + other)),
                                   290.0, 300.0, 4.0)
    assert [p.cells for p in got] == [tuple(other)], "the widest first"
    got = sequential.within_budget(sequential.precision_requests([wide, wider], both | dict.fromkeys(cells, 2), 4,
                                                                 set(cells + other)), 290.0, 300.0, 4.0)
    assert [p.cells for p in got] == [tuple(cells)], "below the minimum of groups before the widest"


def test_the_quick_profile_bounds_figure_5s_extra_groups_by_a_budget_of_operator_seconds():
    m = matrix.load()
    assert m.operator_max_repeats("quick", 2) == 12 and m.operator_budget_s("quick") == 270.0
    assert m.operator_max_repeats("quick", 2, given=True) == 2, "--max-repeats caps the operators too"
    assert m.operator_budget_s("target") is None, "a profile without one: the cap alone"


def test_the_runners_budget_estimates_a_process_from_the_operator_results_that_measured_one(monkeypatch):
    """An operator result with no elapsed time (resumed from an older run, or failed before its clock) is left out
    of the estimate of one process's cost, not counted as a 0 s process that would let the budget hold more."""
    from harness.launch import runner, sequential
    from harness.results.store import RunStore
    from harness.scenarios.operator import turns

    results = [r for r in RunStore("docs/runs/cpu-quick").results() if r.get("kind") == "operator"]
    assert len(results) >= 24
    measured = [turns.own_seconds(r) for r in results[::2]]
    for r in results[1::2]:
        r.pop("elapsed_s", None)

    class Store:
        def results(self):
            return results

    cells = [c for c in matrix.load().expand("quick") if c.kind == "operator"]
    seen = {}

    def within_budget(asked, spent_s, budget_s, run_s):
        seen.update(spent=spent_s, run=run_s)
        return asked

    monkeypatch.setattr(sequential, "within_budget", within_budget)
    verdicts = runner.Verdicts(Store(), cells, "quick", "cpu", 2, [], lambda line: None, op_cap=12, op_budget_s=270.0)
    verdicts.requests()
    assert seen["spent"] == pytest.approx(sum(measured))
    assert seen["run"] == pytest.approx(sum(measured) / len(measured)) and seen["run"] > 0.5
