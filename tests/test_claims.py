"""The paper's claims as rules (harness/claims.py): every verdict of every claim from small made-up results,
and the rules on a real recorded quick run (tests/fixtures/results_quick.json, measured on this project's
CPU host; regenerate with `python -m tests.test_claims RUN_DIR`)."""

import json
import sys
from pathlib import Path
from statistics import median

import pytest

from harness import claims
from harness.claims import TIE_RATIO
from tests.helpers import CLAIM_MODELS as MODELS
from tests.helpers import PAPER_OPS, claim, paper_world
from tests.helpers import model_result as model
from tests.helpers import scaling_result as scaling

FIXTURE = Path(__file__).with_name("fixtures") / "results_quick.json"
# The fields the rules and the report read (curves, rounded, for Figure 3); epochs and logs are left out.
KEEP = ("cell", "repeat", "status", "reason", "platform", "kind", "model", "op", "framework", "mode", "amp",
        "devices", "synthetic", "dataset", "throughput_unit", "metric", "target", "best_metric",
        "first_epoch_throughput", "mean_throughput_other_epochs", "time_to_target_s", "global_throughput",
        "per_device_throughput", "efficiency", "params", "shape", "dtype", "direction", "throughput", "median_s",
        "iqr_s", "versions", "curve", "settings", "process_env", "test_metric", "flops_per_s")

def cid(name, fw, mode, amp="off", devices=1):
    return f"{'model' if devices == 1 else 'scaling'}/{name}/{fw}/{mode}/amp-{amp}/{devices}dev"


def setf(world, cell, **fields):
    world[(cell, 0)].update(fields)


def drop(world, pred):
    for key in [k for k in world if pred(k[0])]:
        del world[key]


# -- the paper's world: everything supported ----------------------------------------------------------------------
def test_results_that_agree_with_the_paper_support_every_claim():
    out = claims.evaluate(list(paper_world().values()), platform="cpu")
    assert [c.id for c in out] == ["C1", "C2", "C3", "C4", "C5", "O1", "O2", "O3"]
    for c in out:
        assert c.verdict == "supported", (c.id, c.reason, c.evidence)
        assert c.evidence and c.cells and all(p.outcome == claims.SUPPORTS for p in c.parts)
        assert c.title and c.paper_evidence
    json.dumps([c.to_dict() for c in out])   # the report serialises them


# -- C1 dense vs sparse -------------------------------------------------------------------------------------------
def _c1_flip(world, models):
    for m in models:
        pt_fast = m == "resnet50"     # the opposite of the paper
        setf(world, cid(m, "mindspore", "graph"), mean_throughput_other_epochs=50.0 if pt_fast else 200.0,
             time_to_target_s=20.0 if pt_fast else 1.0)


def test_c1_contradicted_when_every_model_goes_the_other_way():
    w = paper_world()
    _c1_flip(w, MODELS)
    c = claim(w, "C1")
    assert c.verdict == "contradicted" and "0 of 6" in c.reason
    assert any("ResNet50 mean throughput" in e and "MindSpore/PyTorch 0.50" in e for e in c.evidence)


def test_c1_mixed_when_one_model_disagrees():
    w = paper_world()
    _c1_flip(w, ["gcn"])
    c = claim(w, "C1")
    assert c.verdict == "mixed" and "GCN throughput" in c.reason and "GCN time to target" in c.reason


def test_c1_a_tie_does_not_support_a_faster_claim():
    w = paper_world()
    for m in MODELS:
        setf(w, cid(m, "mindspore", "graph"), mean_throughput_other_epochs=102.0, time_to_target_s=None)
        setf(w, cid(m, "pytorch", "eager"), mean_throughput_other_epochs=100.0)
    c = claim(w, "C1")
    assert c.verdict == "contradicted" and all("a tie" in e for e in c.evidence)
    assert "did not reach the target" in c.reason          # the time-to-target parts are not measured


def test_c1_not_measured_names_the_failed_cells():
    w = paper_world()
    for m in MODELS:
        w[(cid(m, "mindspore", "graph"), 0)] = model(m, "mindspore", "graph", other=0, status="failed")
    c = claim(w, "C1")
    assert c.verdict == "not measured" and not c.evidence
    for m in MODELS:
        assert f"{cid(m, 'mindspore', 'graph')} failed: exit code 1: boom" in c.reason


def test_c1_supported_on_the_models_measured_says_what_is_missing():
    w = paper_world()
    drop(w, lambda cell: "/gru/" in cell)
    c = claim(w, "C1")
    assert c.verdict == "supported"
    assert f"{cid('gru', 'pytorch', 'eager')} not in the results" in c.reason
    assert any("only 4 of 5 comparisons measured" in x for x in c.caveats)


def test_c1_throughput_and_time_to_target_disagreeing_is_mixed():
    w = paper_world()
    setf(w, cid("resnet50", "mindspore", "graph"), time_to_target_s=50.0)   # faster, but later to the target
    assert claim(w, "C1").verdict == "mixed"


# -- C2 first epoch -----------------------------------------------------------------------------------------------
def test_c2_contradicted_when_mindspore_first_epoch_is_not_slow():
    w = paper_world()
    for m in MODELS:
        setf(w, cid(m, "mindspore", "graph"), first_epoch_throughput=w[(cid(m, "mindspore", "graph"), 0)]
             ["mean_throughput_other_epochs"])
    c = claim(w, "C2")
    assert c.verdict == "contradicted" and "not below 80%" in c.evidence[0]


def test_c2_contradicted_when_pytorch_first_epoch_is_as_slow():
    w = paper_world()
    for m in MODELS:
        setf(w, cid(m, "pytorch", "eager"), first_epoch_throughput=30.0)   # 0.3 of 100, like MindSpore's
    c = claim(w, "C2")
    assert c.verdict == "contradicted" and "not below PyTorch's" in c.evidence[0]


def test_c2_mixed_and_not_measured():
    w = paper_world()
    setf(w, cid("gcn", "mindspore", "graph"), first_epoch_throughput=50.0)
    assert claim(w, "C2").verdict == "mixed"
    w = paper_world()
    drop(w, lambda cell: cell.startswith("model/") and "/pytorch/eager/amp-off/" in cell)
    c = claim(w, "C2")
    assert c.verdict == "not measured" and f"{cid('gcn', 'pytorch', 'eager')} not in the results" in c.reason


# -- C3 AMP -------------------------------------------------------------------------------------------------------
def _amp_scale(world, framework, factor):
    for (cell, _), r in world.items():
        if cell.startswith("model/") and r["framework"] == framework and r["amp"] != "off":
            off = world[(cell.replace(f"amp-{r['amp']}", "amp-off"), 0)]
            r["mean_throughput_other_epochs"] = factor * off["mean_throughput_other_epochs"]


def test_c3_verdicts():
    w = paper_world()
    _amp_scale(w, "pytorch", 0.5)
    _amp_scale(w, "mindspore", 0.5)
    c = claim(w, "C3")
    assert c.verdict == "contradicted" and len(c.evidence) == 9 and "AMP/off 0.50" in c.evidence[0]
    w = paper_world()
    _amp_scale(w, "mindspore", 0.8)
    c = claim(w, "C3")
    assert c.verdict == "mixed" and "3 of 9" in c.reason
    w = paper_world()
    drop(w, lambda cell: "/amp-O" in cell)
    c = claim(w, "C3")
    assert c.verdict == "not measured" and f"{cid('gru', 'mindspore', 'graph', 'O3')} not in the results" in c.reason


# -- C4 PyNative --------------------------------------------------------------------------------------------------
def test_c4_verdicts():
    w = paper_world()
    for m in MODELS:
        setf(w, cid(m, "mindspore", "pynative"), mean_throughput_other_epochs=1000.0)
    assert claim(w, "C4").verdict == "contradicted"
    w = paper_world()
    setf(w, cid("gcn", "mindspore", "pynative"), mean_throughput_other_epochs=70.0)  # GRAPH 50, PyTorch 100
    c = claim(w, "C4")
    assert c.verdict == "mixed" and "(not: GCN PyNative vs MindSpore GRAPH)" in c.reason
    w = paper_world()
    for m in MODELS:
        w[(cid(m, "mindspore", "pynative"), 0)] = model(m, "mindspore", "pynative", other=0, status="skipped",
                                                        reason="PYNATIVE is not available here")
    c = claim(w, "C4")
    assert c.verdict == "not measured" and "pynative/amp-off/1dev skipped: PYNATIVE is not available" in c.reason


# -- C5 scaling ---------------------------------------------------------------------------------------------------
def test_c5_verdicts():
    w = paper_world()
    setf(w, cid("resnet50", "mindspore", "graph", devices=2), per_device_throughput=0.5 * 200)
    setf(w, cid("resnet50", "pytorch", "eager", devices=2), per_device_throughput=0.9 * 100)
    c = claim(w, "C5")
    assert c.verdict == "contradicted" and "MindSpore GRAPH 0.50" in c.evidence[0] and "PyTorch eager 0.90" in \
        c.evidence[0]
    w = paper_world()
    for r in (scaling("resnet50", "mindspore", "graph", 4, 0.5 * 200), scaling("resnet50", "pytorch", "eager", 4, 90)):
        w[(r["cell"], 0)] = r
    c = claim(w, "C5")
    assert c.verdict == "mixed" and "at 4 devices" in c.reason
    w = paper_world()
    drop(w, lambda cell: cell.startswith("scaling/"))
    c = claim(w, "C5")
    assert c.verdict == "not measured" and "no scaling cells" in c.reason
    w = paper_world()
    w[(cid("resnet50", "pytorch", "eager", devices=2), 0)] = model("resnet50", "pytorch", "eager", devices=2,
                                                                   other=0, status="timeout", reason="ran 1800 s")
    c = claim(w, "C5")
    assert c.verdict == "not measured" and "eager/amp-off/2dev timeout: ran 1800 s" in c.reason


def test_c5_falls_back_to_the_stored_efficiency_and_notes_the_device_counts():
    w = paper_world()
    drop(w, lambda cell: cell == cid("resnet50", "mindspore", "graph"))
    setf(w, cid("resnet50", "mindspore", "graph", devices=2), efficiency=0.95)
    c = claim(w, "C5")
    assert c.verdict == "supported" and "0.95 (stored efficiency)" in c.evidence[0]
    assert any("device counts measured: 1, 2 (paper: up to 8)" in x for x in c.caveats)


# -- operators ----------------------------------------------------------------------------------------------------
def _ops(**override):
    return paper_world({**PAPER_OPS, **override})


def test_o1_verdicts():
    down = {"batchnorm2d": {32: 3.0, 512: 2.0}, "conv2d": {9280: 2.0, 147712: 0.5}, "linear": {33280: 1.5, 262656: 0.5}}
    c = claim(_ops(**down), "O1")
    assert c.verdict == "contradicted" and len(c.parts) == 6
    c = claim(_ops(linear=down["linear"]), "O1")
    assert c.verdict == "mixed" and "(not: linear fp32 fwd, linear fp32 fwd+bwd)" in c.reason
    c = claim(_ops(linear={33280: 0.5, 262656: 0.51}), "O1")      # within the tie margin: no growth
    assert c.verdict == "mixed" and "a tie" in " ".join(c.evidence)
    c = claim(paper_world({}), "O1")
    assert c.verdict == "not measured" and c.reason == "operators: not measured — no operator cells in the results"
    c = claim(paper_world({"linear": {33280: 0.5}}), "O1")
    assert c.verdict == "not measured" and "only 1 distinct parameter count" in c.reason


def test_o1_reports_the_rank_correlation_from_three_sizes():
    c = claim(paper_world(), "O1")
    conv = next(e for e in c.evidence if e.startswith("conv2d fp32 fwd,"))
    assert "Spearman rho(params, ratio) +1.00 over 3 configurations" in conv


def test_o2_verdicts():
    c = claim(_ops(batchnorm2d={32: 0.5, 512: 3.0}), "O2")
    assert c.verdict == "contradicted" and "median ratio 0.50" in c.evidence[0]
    w = _ops()
    for r in w.values():
        if r.get("op") == "batchnorm2d" and r["mode"] == "graph" and r["direction"] == "fwd+bwd":
            r["throughput"] = 500.0
    c = claim(w, "O2")
    assert c.verdict == "mixed" and "(not: batchnorm2d fp32 fwd+bwd)" in c.reason
    w = _ops()
    for r in w.values():
        if r.get("op") == "batchnorm2d":
            r.update(status="failed", reason="exit code 1: no kernel")
    c = claim(w, "O2")
    assert c.verdict == "not measured" and "12 of 12 batchnorm2d cells not ok" in c.reason
    assert "failed: exit code 1: no kernel" in c.reason


def test_o3_verdicts():
    c = claim(_ops(conv2d={9280: 0.5, 36928: 0.6, 147712: 0.9}), "O3")
    assert c.verdict == "contradicted" and "MindSpore not ahead even at the largest" in c.evidence[0]
    c = claim(_ops(conv2d={9280: 1.5, 36928: 1.6, 147712: 2.0}), "O3")
    assert c.verdict == "contradicted" and "MindSpore ahead at smaller sizes too" in c.evidence[0]
    w = _ops()
    for r in w.values():
        if r.get("op") == "conv2d" and r["mode"] == "graph" and r["direction"] == "fwd" and r["params"] < 100000:
            r["throughput"] = 3000.0
    assert claim(w, "O3").verdict == "mixed"
    c = claim(paper_world({"linear": PAPER_OPS["linear"]}), "O3")
    assert c.verdict == "not measured" and "no conv2d operator cells in the results" in c.reason


def test_operators_fall_back_to_pynative_and_say_so():
    w = paper_world()
    drop(w, lambda cell: cell.startswith("operator/") and "/mindspore/graph/" in cell)
    c = claim(w, "O2")
    assert c.verdict == "contradicted" and "MindSpore PYNATIVE / PyTorch eager" in c.evidence[0]


# -- medians, platforms, caveats ----------------------------------------------------------------------------------
def test_medians_over_ok_repeats_only():
    w = paper_world()
    base = w.pop((cid("gcn", "pytorch", "eager"), 0))
    for k, (tput, ttt) in enumerate(((100.0, 2.0), (90000.0, None), (120.0, 3.0))):
        r = {**base, "repeat": k, "mean_throughput_other_epochs": tput, "time_to_target_s": ttt}
        w[(r["cell"], k)] = r
    w[(base["cell"], 3)] = {**base, "repeat": 3, "status": "failed", "mean_throughput_other_epochs": 1.0}
    c = claim(w, "C1")
    assert any("PyTorch eager 120 items/s" in e for e in c.evidence)           # median of 100, 90000, 120
    # time to target: [2, 3, never] -> median 3
    assert any("GCN time to target: PyTorch 3 s" in e for e in c.evidence)
    assert any("(3 of 4 repeats ok)" in x for x in c.caveats)


def test_platforms_are_never_mixed():
    cpu = list(paper_world().values())
    npu = [{**r, "platform": "ascend"} for r in cpu]
    with pytest.raises(ValueError, match="several platforms"):
        claims.evaluate(cpu + npu)
    by = claims.evaluate_by_platform(cpu + npu, profile="quick")
    assert set(by) == {"ascend", "cpu"}
    c_npu = by["ascend"][0]
    run_npu = claims.run_caveats(cpu + npu, platform="ascend", profile="quick")
    run_cpu = claims.run_caveats(cpu + npu, platform="cpu", profile="quick")
    assert not any("not on the Ascend" in x for x in run_npu)
    assert any("measured on cpu, not on the Ascend 910" in x for x in run_cpu)
    assert any("quick profile" in x for x in run_cpu)
    # said once for the platform, not again under each claim
    assert not any("not on the Ascend" in x or "quick profile" in x for c in by["cpu"] for x in c.caveats)
    assert claims.evaluate(cpu + npu, platform="ascend")[0].cells == c_npu.cells
    target = claims.run_caveats(cpu, profile="target")
    assert any("target profile" in x and "stopping at its target" in x for x in target)
    assert not any("quick profile" in x for x in target)


def test_synthetic_data_and_versions_are_caveats_not_verdicts():
    w = paper_world()
    setf(w, cid("resnet50", "pytorch", "eager"), synthetic=True, dataset="cifar10", versions={"torch": "2.1"})
    c = claim(w, "C1")
    assert c.verdict == "supported"
    assert any("synthetic data for ResNet50 (cifar10)" in x for x in c.caveats)        # C1's own: it used ResNet50
    assert not any("synthetic" in x for x in claim(w, "O1").caveats)
    run = claims.run_caveats(list(w.values()))                                         # the versions: the run's
    assert any("torch 2.1; the paper used PyTorch 1.8.1" in x for x in run)
    assert not any("framework versions" in x for x in c.caveats)
    setf(w, cid("gcn", "pytorch", "eager"), versions={"torch": "2.2"})
    assert any("framework versions torch 2.1 and 2.2; the paper" in x for x in claims.run_caveats(list(w.values())))


def test_one_repeat_is_said_once_where_every_claim_has_it_else_under_the_claims_that_do():
    w = paper_world()
    assert any("one repeat per cell: no spread" in x for x in claims.run_caveats(list(w.values())))
    assert not any("one repeat" in x for c in claims.evaluate(list(w.values())) for x in c.caveats)
    # the model claims with 3 repeats a cell, the operator claims with one
    mixed = {k: v for k, v in _repeated(w).items() if v["kind"] != "operator"}
    mixed |= {k: v for k, v in w.items() if v["kind"] == "operator"}
    assert not any("one repeat" in x for x in claims.run_caveats(list(mixed.values())))
    by = {c.id: c for c in claims.evaluate(list(mixed.values()))}
    assert {cid_ for cid_, c in by.items() if any("one repeat per cell: no spread" in x for x in c.caveats)} == {
        "O1", "O2", "O3"}


def test_time_to_target_table():
    w = paper_world()
    setf(w, cid("gru", "mindspore", "graph"), time_to_target_s=None)
    rows = {r["model"]: r for r in claims.time_to_target_table(list(w.values()))}
    assert rows["resnet50"]["ratio"] == pytest.approx(5.0) and rows["resnet50"]["paper_ratio"] == 5.03
    assert rows["gcn"]["ratio"] == pytest.approx(0.2) and rows["gcn"]["paper_ratio"] == pytest.approx(1 / 1.49)
    assert rows["gru"]["ratio"] is None and rows["gru"]["notes"] == ["MindSpore did not reach the target"]
    assert rows["gru"]["paper_ratio"] == pytest.approx(0.474, abs=1e-3)
    assert rows["gcn"]["setting"] == "PyTorch eager vs MindSpore GRAPH, AMP off, 1 device"


# -- a real recorded run ------------------------------------------------------------------------------------------
def _side(ratio):
    return "above" if ratio > TIE_RATIO else "below" if ratio < 1 / TIE_RATIO else "tie"


def _aggregate(outcomes):
    if not outcomes:
        return "not measured"
    return "supported" if all(outcomes) else "contradicted" if not any(outcomes) else "mixed"


def _expected(results):
    """The verdicts, computed here straight from the numbers of a quick run (one repeat per cell)."""
    ok = {r["cell"]: r for r in results if r["status"] == "ok"}

    def tput(cell):
        return ok[cell]["mean_throughput_other_epochs"] if cell in ok else None

    exp = {}
    c1 = []
    for m, expect in (("resnet50", "above"), ("gcn", "below"), ("gru", "below")):
        pt, ms = ok.get(cid(m, "pytorch", "eager")), ok.get(cid(m, "mindspore", "graph"))
        if pt and ms:
            c1.append(_side(ms["mean_throughput_other_epochs"] / pt["mean_throughput_other_epochs"]) == expect)
            if pt["time_to_target_s"] and ms["time_to_target_s"]:
                c1.append(_side(pt["time_to_target_s"] / ms["time_to_target_s"]) == expect)
    exp["C1"] = _aggregate(c1)
    c2 = []
    for m in MODELS:
        pt, ms = ok.get(cid(m, "pytorch", "eager")), ok.get(cid(m, "mindspore", "graph"))
        if pt and ms:
            fp = pt["first_epoch_throughput"] / pt["mean_throughput_other_epochs"]
            fm = ms["first_epoch_throughput"] / ms["mean_throughput_other_epochs"]
            c2.append(fm <= claims.MARKED_FIRST_EPOCH and fm * TIE_RATIO < fp)
    exp["C2"] = _aggregate(c2)
    c3, c4 = [], []
    for m in MODELS:
        for fw, mode, levels in (("pytorch", "eager", ("O2",)), ("mindspore", "graph", ("O2", "O3"))):
            for level in levels:
                a, b = tput(cid(m, fw, mode, level)), tput(cid(m, fw, mode))
                if a and b:
                    c3.append(_side(a / b) == "above")
        pyn = tput(cid(m, "mindspore", "pynative"))
        for other in (cid(m, "mindspore", "graph"), cid(m, "pytorch", "eager")):
            if pyn and tput(other):
                c4.append(_side(pyn / tput(other)) == "below")
    exp["C3"], exp["C4"] = _aggregate(c3), _aggregate(c4)
    c5 = []
    for cell, r in ok.items():
        if r["kind"] == "scaling" and r["framework"] == "mindspore" and r["mode"] == "graph":
            pt_cell = cell.replace("/mindspore/graph/", "/pytorch/eager/")
            if pt_cell in ok:
                eff_ms = r["per_device_throughput"] / tput(cid("resnet50", "mindspore", "graph", r["amp"]))
                eff_pt = ok[pt_cell]["per_device_throughput"] / tput(cid("resnet50", "pytorch", "eager", r["amp"]))
                c5.append(_side(eff_ms / eff_pt) == "above")
    exp["C5"] = _aggregate(c5)
    groups = {}
    for cell, r in ok.items():
        if r["kind"] == "operator" and r["framework"] == "mindspore" and r["mode"] == "graph":
            pt = ok.get(cell.replace("/mindspore/graph/", "/pytorch/eager/"))
            if pt:
                groups.setdefault((r["op"], r["dtype"], r["direction"]), []).append(
                    (r["params"], r["throughput"] / pt["throughput"]))
    o1, o2, o3 = [], [], []
    for (name, _, _), pairs in groups.items():
        levels = sorted({p for p, _ in pairs})
        k = max(1, len(levels) // 3)
        low = median(x for p, x in pairs if p in levels[:k])
        high = median(x for p, x in pairs if p in levels[-k:])
        rest = [x for p, x in pairs if p not in levels[-k:]]
        o1.append(_side(high / low) == "above")
        if name == "batchnorm2d":
            o2.append(_side(median(x for p, x in pairs if p in levels[:max(1, len(levels) // 2)])) == "above")
        if name == "conv2d":
            o3.append(_side(high) == "above" and _side(median(rest)) != "above")
    exp["O1"], exp["O2"], exp["O3"] = _aggregate(o1), _aggregate(o2), _aggregate(o3)
    return exp


def test_fixture_is_a_small_real_quick_run():
    assert FIXTURE.stat().st_size < 60_000
    results = json.loads(FIXTURE.read_text())
    assert len(results) == 63 and {r["platform"] for r in results} == {"cpu"}
    assert {r["kind"] for r in results} == {"model", "scaling", "operator"}


def test_rules_on_a_real_quick_run_follow_its_numbers():
    results = json.loads(FIXTURE.read_text())
    out = {c.id: c for c in claims.evaluate(results, profile="quick")}
    expected = _expected(results)
    assert {k: c.verdict for k, c in out.items()} == expected
    for c in out.values():
        assert c.verdict in claims.VERDICTS and c.reason
        assert not any("measured on cpu" in x or "quick profile" in x or "one repeat per cell" in x
                       for x in c.caveats)
    run = claims.run_caveats(results, profile="quick", claims=list(out.values()))
    assert run == claims.run_caveats(results, profile="quick")
    assert [x.split(":")[0].split(";")[0] for x in run] == [
        "measured on cpu, not on the Ascend 910 NPUs of the paper", "quick profile", "one repeat per cell",
        "framework versions mindspore 2.10.0, torch 2.13.0+cpu"]
    assert any("synthetic data for ResNet50 (cifar10)" in x for x in out["C1"].caveats)
    table = {r["model"]: r for r in claims.time_to_target_table(results)}
    gcn_pt = next(r for r in results if r["cell"] == cid("gcn", "pytorch", "eager"))["time_to_target_s"]
    gcn_ms = next(r for r in results if r["cell"] == cid("gcn", "mindspore", "graph"))["time_to_target_s"]
    assert table["gcn"]["ratio"] == pytest.approx(gcn_pt / gcn_ms)


def write_fixture(run: str) -> None:
    from harness.results.store import RunStore

    rows = [{k: r.get(k) for k in KEEP if k in r} for r in RunStore(run).results()]
    for r in rows:
        if r.get("curve"):
            step = -(-len(r["curve"]) // 40)  # at most ~40 points, the last kept: enough to draw, small to store
            points = r["curve"][::step] + ([r["curve"][-1]] if (len(r["curve"]) - 1) % step else [])
            r["curve"] = [[round(t, 3), round(v, 4)] for t, v in points]
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text("[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n")


if __name__ == "__main__":
    write_fixture(sys.argv[1])


# -- intervals from repeats ---------------------------------------------------------------------------------------
def _repeated(world, scales=(0.97, 1.0, 1.03)):
    """Every result of a world repeated, its throughputs and times scaled per repeat."""
    out = {}
    for (cell, _), r in world.items():
        for k, f in enumerate(scales):
            scaled = {key: r[key] * f for key in ("mean_throughput_other_epochs", "time_to_target_s", "throughput",
                                                  "per_device_throughput", "global_throughput")
                      if isinstance(r.get(key), float)}
            out[(cell, k)] = {**r, **scaled, "repeat": k}
    return out


def _spread_cell(world, cell, values, key="mean_throughput_other_epochs"):
    for k, v in enumerate(values):
        world[(cell, k)][key] = v


def test_with_repeats_every_ratio_carries_an_interval_and_a_clear_one_keeps_its_verdict():
    w = _repeated(paper_world())
    for cid_ in ("C1", "C2", "C3", "C4", "C5"):
        c = claim(w, cid_)
        assert c.verdict == "supported", c.reason
        assert all(p.interval is not None and p.interval[0] <= p.interval[1] for p in c.parts)
        assert all("95% interval" in e for e in c.evidence)
        assert not any("percentile bootstrap" in x or "one repeat" in x for x in c.caveats)
        assert all("interval" in p for p in c.to_dict()["parts"])
    run = claims.run_caveats(list(w.values()))
    assert sum("percentile bootstrap" in x for x in run) == 1 and not any("one repeat" in x for x in run)
    rows = claims.time_to_target_table(list(w.values()))
    assert all(lo <= r["ratio"] <= hi for r in rows for lo, hi in [r["ratio_interval"]])


def test_a_ratio_whose_interval_straddles_the_tie_band_is_inconclusive():
    w = _repeated(paper_world())
    # GCN C4: PyNative vs GRAPH (50): PyNative 45 to 52 over the repeats: the ratio 0.90-1.04 crosses 1/1.05.
    _spread_cell(w, cid("gcn", "mindspore", "pynative"), (45.0, 48.0, 52.0))
    c = claim(w, "C4")
    part = next(p for p in c.parts if p.name == "GCN PyNative vs MindSpore GRAPH")
    assert part.outcome == claims.INCONCLUSIVE and "across the ±5% tie band" in part.detail
    # The other parts support C4, but this one could still fall either way: supported or mixed, so no verdict.
    assert c.verdict == claims.INCONCLUSIVE and "inconclusive (interval across the tie band): GCN PyNative" in c.reason
    assert "supported or mixed" in c.reason
    # A part against the paper beside one for it is mixed whatever the inconclusive one does.
    _spread_cell(w, cid("resnet50", "mindspore", "pynative"), (1800.0, 2000.0, 2200.0))
    c = claim(w, "C4")
    assert c.verdict == "mixed" and any(p.outcome == claims.INCONCLUSIVE for p in c.parts)
    # Every measured part inconclusive: the claim is.
    for m in MODELS:
        ms = 200.0 if m == "resnet50" else 50.0
        _spread_cell(w, cid(m, "mindspore", "pynative"), (0.9 * ms, 0.96 * ms, 1.04 * ms))
        _spread_cell(w, cid(m, "pytorch", "eager"), (0.9 * ms, 0.96 * ms, 1.04 * ms))
    c = claim(w, "C4")
    assert c.verdict == claims.INCONCLUSIVE and "inconclusive" in claims.VERDICTS
    assert all(p.outcome == claims.INCONCLUSIVE for p in c.parts)


def test_an_interval_wholly_beyond_the_tie_band_contradicts_and_one_repeat_keeps_the_old_words():
    w = _repeated(paper_world())
    for m in MODELS:  # PyNative well above GRAPH and PyTorch in every repeat
        _spread_cell(w, cid(m, "mindspore", "pynative"), (900.0, 1000.0, 1100.0))
    c = claim(w, "C4")
    assert c.verdict == "contradicted" and all(p.outcome == "contradicts" for p in c.parts)
    one = claim(paper_world(), "C4")
    assert all(p.interval is None and "interval" not in p.detail for p in one.parts)
    assert all("interval" not in p for p in one.to_dict()["parts"])
    assert "ratio_interval" not in claims.time_to_target_table(list(paper_world().values()))[0]


def test_a_time_to_target_never_reached_in_some_repeats_widens_its_interval():
    w = _repeated(paper_world())
    _spread_cell(w, cid("gcn", "mindspore", "graph"), (10.0, 10.5, None), key="time_to_target_s")
    row = next(r for r in claims.time_to_target_table(list(w.values())) if r["model"] == "gcn")
    # median of 10, 10.5 and never (+inf): 10.5; a resample with two of three never reached has a ratio of 0
    assert row["ratio"] == pytest.approx(2.0 / 10.5) and row["ratio_interval"][0] == 0.0


def test_c2_with_repeats_is_decided_by_intervals():
    w = _repeated(paper_world())
    c = claim(w, "C2")
    assert c.verdict == "supported" and all("95% intervals: MindSpore's" in e for e in c.evidence)
    # GCN MindSpore's first-epoch fraction 0.7, 0.8, 0.9 over the repeats: its interval reaches across 80%.
    cell = cid("gcn", "mindspore", "graph")
    for k, frac in enumerate((0.7, 0.8, 0.9)):
        w[(cell, k)]["first_epoch_throughput"] = frac * w[(cell, k)]["mean_throughput_other_epochs"]
    part = next(p for p in claim(w, "C2").parts if p.name == "GCN first epoch")
    assert part.outcome == claims.INCONCLUSIVE and "MindSpore's interval reaches across 80%" in part.detail
    # Every repeat at 0.9: not marked, whatever the resample: contradicts.
    for k in range(3):
        w[(cell, k)]["first_epoch_throughput"] = 0.9 * w[(cell, k)]["mean_throughput_other_epochs"]
    part = next(p for p in claim(w, "C2").parts if p.name == "GCN first epoch")
    assert part.outcome == "contradicts" and "MindSpore's is not below 80%" in part.detail


def test_c5_with_repeats_has_the_interval_of_a_ratio_of_two_efficiencies():
    w = _repeated(paper_world())
    part = claim(w, "C5").parts[0]
    # MindSpore 0.9 and PyTorch 0.6 in every repeat (both cells scaled alike): ratio 1.5, an interval around it
    assert part.outcome == "supports" and part.interval[0] <= 1.5 <= part.interval[1]
    # MindSpore's per-device throughput 0.55, 0.6 and 0.7 of its 1-device 200: efficiency ratio 0.92-1.17
    ms = cid("resnet50", "mindspore", "graph", devices=2)
    _spread_cell(w, ms, (0.55 * 200, 0.6 * 200, 0.7 * 200), key="per_device_throughput")
    c = claim(w, "C5")
    assert c.parts[0].outcome == claims.INCONCLUSIVE and c.verdict == claims.INCONCLUSIVE
    assert c.parts[0].interval[0] < 1 / TIE_RATIO and c.parts[0].interval[1] > TIE_RATIO


def test_quotient_interval_is_ratio_interval_for_one_sample_a_side():
    from harness.results import measure
    a, b = measure.Sample((10.0, 12.0, 11.0)), measure.Sample((5.0, 6.5, 5.5))
    assert measure.quotient_interval((a,), (b,)) == measure.ratio_interval(a, b)
    lo, hi = measure.quotient_interval((a,))          # one median's interval: within the repeats' range
    assert 10.0 <= lo <= 11.0 <= hi <= 12.0
    assert measure.quotient_interval((a, measure.Sample((2.0,))), (b,)) is None   # one repeat: no interval
