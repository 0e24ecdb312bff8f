"""The paper's conclusions as rules: which ones a set of results supports, contradicts, or cannot judge.

Input is the list of result dicts `python -m harness results RUN --json` prints (one per cell and repeat,
from one or several runs). Only `status == "ok"` results count; a cell's value is the median over its ok
repeats. Results from several platforms are never mixed: `evaluate` takes one platform (or refuses
results from several), `evaluate_by_platform` evaluates each.

Verdicts (VERDICTS):
  supported     every measured part of the claim agrees with the paper
  contradicted  no measured part agrees (a tie counts as not agreeing: the claim is that one side is ahead)
  mixed         some parts agree and some do not. The claims are conjunctions (C1 is three models with
                opposite expectations, C3 two frameworks at several AMP levels, O1-O3 several operator
                directions/dtypes); on real data one model can confirm what another refutes, and folding
                that into supported or contradicted would hide half of the evidence. The evidence lists
                which part went which way.
  not measured  no part of the claim could be evaluated; `reason` names the cells that are missing,
                failed, skipped or timed out.
A claim whose measured parts all agree but some parts were not measured is `supported`, with the
unmeasured parts in `reason` and `caveats`.

Fair settings (the paper's defaults, PyTorch 1.8.1 had no torch.compile): PyTorch eager vs MindSpore GRAPH,
AMP off, 1 device, unless a claim is about another mode or AMP level. Operators: MindSpore GRAPH (PYNATIVE
only where GRAPH was not measured, said in the evidence) against PyTorch eager, same op/shape/dtype/direction.

The verdict does not depend on the platform, profile, data or number of repeats; those go into `caveats`:
a contradiction measured on a CPU says something about CPUs, not about the Ascend 910 the paper used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

VERDICTS = ("supported", "contradicted", "mixed", "not measured")
SUPPORTS, CONTRADICTS, NOT_MEASURED = "supports", "contradicts", "not measured"   # outcome of one Part

# Two throughputs (or times, or efficiencies) within a factor TIE_RATIO of each other are a tie: single-run
# throughput on a shared host varies by a few percent from run to run (the quick profile has one repeat),
# so a 5% difference is not evidence that one side is ahead. A tie never supports an "X is ahead" claim.
TIE_RATIO = 1.05
# C2: a first epoch is "markedly" slower when its throughput is at most 80% of the mean of the other epochs
# (the paper attributes MindSpore's slow first epoch to graph compilation, a large one-off cost; 20% is well
# above epoch-to-epoch noise).
MARKED_FIRST_EPOCH = 0.8
# Operators, per op, dtype and direction: "few" and "many" parameters are the lowest and highest third of the
# op's distinct parameter counts measured (at least one count each; batch size does not change the count);
# "small" BatchNorm (O2) is the lower half of its distinct counts.
# O1 is tested per operator as a trend: the median MindSpore/PyTorch ratio at the most parameters over the
# median at the fewest must exceed TIE_RATIO. It is not tested as a crossing (ratio < 1 at the low end and
# > 1 at the high end) over all operators pooled: BatchNorm has by far the fewest parameters of the three, and
# the paper's own O2 (MindSpore BatchNorm ahead even when small) would then contradict O1. Where 1 is crossed
# is what O2 (BatchNorm) and O3 (Conv2d) test. Terciles rather than a rank correlation because the quick
# profile has two sizes per operator; the Spearman correlation is reported alongside from 3 configurations.
TERCILE = 3
MIN_PARAM_LEVELS = 2   # fewer distinct parameter counts cannot show a trend or tell small from large

# The paper: 8x Ascend 910, PyTorch 1.8.1 vs MindSpore 1.8.1.
PAPER_VERSIONS = {"pytorch": "1.8.1", "mindspore": "1.8.1"}
PAPER_PLATFORM = "ascend"
PAPER_MAX_DEVICES = 8
# Time to reach the target, PyTorch time / MindSpore time: ResNet50/CIFAR-10 "PyTorch took 5.03x longer";
# GCN/Cora "PyTorch 1.49x faster" -> 1/1.49; GRU/Multi30K "PyTorch 2.11x faster" -> 1/2.11.
PAPER_TTT_RATIO = {"resnet50": 5.03, "gcn": 1 / 1.49, "gru": 1 / 2.11}
# C1: which framework the paper found faster per model (dense: MindSpore; sparse/sequence: PyTorch).
PAPER_FASTER = {"resnet50": "mindspore", "gcn": "pytorch", "gru": "pytorch"}
PAPER_MODELS = tuple(PAPER_FASTER)

# The fair default setting of each framework: (mode, amp), 1 device.
BASELINE = {"pytorch": ("eager", "off"), "mindspore": ("graph", "off")}
AMP_LEVELS = {"pytorch": ("O2",), "mindspore": ("O2", "O3")}
OP_PT_MODE = "eager"
OP_MS_MODES = ("graph", "pynative")   # preference order

TITLES = {
    "C1": ("MindSpore is faster on the dense workload (ResNet50), PyTorch on the sparse and sequence workloads "
           "(GCN, GRU)",
           "PyTorch took 5.03x longer than MindSpore to reach the ResNet50/CIFAR-10 target; PyTorch was 1.49x "
           "faster on GCN/Cora and 2.11x faster on GRU/Multi30K (8x Ascend 910, PyTorch 1.8.1, MindSpore 1.8.1)"),
    "C2": ("MindSpore's first epoch is markedly slower than its later epochs (graph compilation), more so than "
           "PyTorch's",
           "MindSpore's first-epoch throughput was far below its mean over the other epochs, attributed to graph "
           "compilation; PyTorch's first epoch was close to its later ones"),
    "C3": ("Mixed precision raises throughput in both frameworks",
           "AMP (PyTorch O2; MindSpore O2 and O3) trained faster than AMP off in both frameworks"),
    "C4": ("MindSpore PyNative is slower than GRAPH mode and than PyTorch",
           "MindSpore in PYNATIVE mode had lower throughput than in GRAPH mode and than PyTorch (eager)"),
    "C5": ("MindSpore scales better over devices than PyTorch",
           "on 1 to 8 Ascend 910s MindSpore's scaling efficiency was higher than PyTorch's"),
    "O1": ("MindSpore's advantage grows with an operator's parameter count (PyTorch ahead at few parameters, "
           "MindSpore at many)",
           "operator benchmark: MindSpore/PyTorch throughput below 1 at small parameter counts, above 1 at "
           "large ones"),
    "O2": ("MindSpore's BatchNorm is ahead even at small sizes",
           "operator benchmark: MindSpore BatchNorm2d faster than PyTorch's even for small configurations"),
    "O3": ("MindSpore's Conv2d is ahead only at large sizes",
           "operator benchmark: MindSpore Conv2d faster than PyTorch's only for the largest configurations"),
}
MODEL_NAMES = {"resnet50": "ResNet50", "gcn": "GCN", "gru": "GRU"}
SETTING_NAMES = {"eager": "eager", "compile": "torch.compile", "graph": "GRAPH", "pynative": "PyNative"}
FW_NAMES = {"pytorch": "PyTorch", "mindspore": "MindSpore"}


@dataclass
class Part:
    """One comparison inside a claim (one model, one framework, one direction...)."""

    name: str
    outcome: str            # supports | contradicts | not measured
    detail: str             # the measured numbers, or why it was not measured
    cells: list[str] = field(default_factory=list)


@dataclass
class Claim:
    id: str
    title: str              # the paper's conclusion, short
    paper_evidence: str     # what the paper reported
    verdict: str            # one of VERDICTS
    reason: str             # why this verdict; for `not measured`, which cells are missing or not ok
    evidence: list[str] = field(default_factory=list)   # measured numbers, one line per comparison
    cells: list[str] = field(default_factory=list)      # ids of the cells whose results were used
    caveats: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- results -> per-cell medians ---------------------------------------------------------------------------
class CellSummary:
    """The repeats of one cell: medians over the ok ones, the status and reason of the others."""

    def __init__(self, cell: str):
        self.cell = cell
        self.ok: list[dict[str, Any]] = []
        self.not_ok: list[dict[str, Any]] = []

    @property
    def first(self) -> dict[str, Any]:
        return (self.ok or self.not_ok)[0]

    def value(self, key: str) -> float | None:
        values = [r[key] for r in self.ok if isinstance(r.get(key), int | float)]
        return median(values) if values else None

    def time_to_target(self) -> float | None:
        """Median over ok repeats, a repeat that never reached the target counting as infinitely slow."""
        values = [r.get("time_to_target_s") for r in self.ok]
        values = [math.inf if v is None else v for v in values]
        m = median(values) if values else math.inf
        return None if math.isinf(m) else m

    def why_not(self) -> str:
        r = self.not_ok[0] if self.not_ok else {}
        reason = str(r.get("reason") or "").strip().splitlines()
        why = f": {reason[0][:160]}" if reason else ""
        return f"{self.cell} {r.get('status', 'not ok')}{why}"


def summarise(results: Iterable[dict[str, Any]]) -> dict[str, CellSummary]:
    index: dict[str, CellSummary] = {}
    for r in results:
        if not r.get("cell"):
            continue
        s = index.setdefault(r["cell"], CellSummary(r["cell"]))
        (s.ok if r.get("status") == "ok" else s.not_ok).append(r)
    return index


def platforms(results: Iterable[dict[str, Any]]) -> list[str]:
    return sorted({r["platform"] for r in results if r.get("platform")})


def _select(results: list[dict[str, Any]], platform: str | None) -> tuple[list[dict[str, Any]], str | None]:
    found = platforms(results)
    if platform is None:
        if len(found) > 1:
            raise ValueError(f"results from several platforms ({', '.join(found)}): pass platform=, or use "
                             f"evaluate_by_platform(); numbers from different hosts are never compared")
        platform = found[0] if found else None
    # Results without a platform (corrupt-file stand-ins) belong to the run only when it has one platform.
    keep_unknown = len(found) <= 1
    return [r for r in results if r.get("platform") == platform or (keep_unknown and not r.get("platform"))], platform


# -- helpers --------------------------------------------------------------------------------------------------
def _model_id(model: str, framework: str, mode: str, amp: str, devices: int = 1) -> str:
    kind = "model" if devices == 1 else "scaling"
    return f"{kind}/{model}/{framework}/{mode}/amp-{amp}/{devices}dev"


def _lookup(index: dict[str, CellSummary], cell: str) -> tuple[CellSummary | None, str | None]:
    s = index.get(cell)
    if s is None:
        return None, f"{cell} not in the results"
    if not s.ok:
        return None, s.why_not()
    return s, None


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def _side(ratio: float) -> str:
    """'above' / 'below' / 'tie' for a ratio of two positive numbers."""
    if ratio > TIE_RATIO:
        return "above"
    if ratio < 1 / TIE_RATIO:
        return "below"
    return "tie"


def _setting(framework: str, mode: str) -> str:
    return f"{FW_NAMES.get(framework, framework)} {SETTING_NAMES.get(mode, mode)}"


def _mname(model: str) -> str:
    return MODEL_NAMES.get(model, model)


def _models(index: dict[str, CellSummary]) -> list[str]:
    seen = {s.first.get("model") or s.cell.split("/")[1] for s in index.values()
            if s.cell.startswith(("model/", "scaling/"))}
    return list(PAPER_MODELS) + sorted(seen - set(PAPER_MODELS))


def _compare(name: str, cells: list[str], ratio: float, expect: str, text: str) -> Part:
    """A part that supports the claim when `ratio` lies on the `expect` side of 1 (beyond the tie margin)."""
    side = _side(ratio)
    verdict = SUPPORTS if side == expect else CONTRADICTS
    note = f", a tie (within {TIE_RATIO - 1:.0%})" if side == "tie" else ""
    return Part(name, verdict, f"{text}{note} — {verdict}", cells)


def _missing(name: str, why: list[str] | str) -> Part:
    why = [why] if isinstance(why, str) else why
    return Part(name, NOT_MEASURED, f"{name}: not measured — {'; '.join(why)}")


# -- the claims ------------------------------------------------------------------------------------------------
def _c1(index: dict[str, CellSummary]) -> list[Part]:
    parts = []
    for model in _models(index):
        faster = PAPER_FASTER.get(model)
        if faster is None:
            continue
        ids = {fw: _model_id(model, fw, *BASELINE[fw]) for fw in BASELINE}
        got = {fw: _lookup(index, cid) for fw, cid in ids.items()}
        missing = [why for _, why in got.values() if why]
        name = f"{_mname(model)} throughput"
        expect = "above" if faster == "mindspore" else "below"
        if missing:
            parts.append(_missing(_mname(model), missing))
            continue
        pt, ms = got["pytorch"][0], got["mindspore"][0]
        unit = pt.first.get("throughput_unit") or ""
        tp, tm = pt.value("mean_throughput_other_epochs"), ms.value("mean_throughput_other_epochs")
        if tp and tm:
            parts.append(_compare(name, list(ids.values()), tm / tp, expect,
                                  f"{_mname(model)} mean throughput of the epochs after the first: "
                                  f"{_setting('mindspore', BASELINE['mindspore'][0])} {_num(tm)} vs "
                                  f"{_setting('pytorch', BASELINE['pytorch'][0])} {_num(tp)} {unit} "
                                  f"(MindSpore/PyTorch {tm / tp:.2f}; paper: {FW_NAMES[faster]} faster)"))
        else:
            parts.append(_missing(name, "no mean throughput of the epochs after the first (a single epoch?)"))
        ttp, ttm = pt.time_to_target(), ms.time_to_target()
        tname = f"{_mname(model)} time to target"
        if ttp is None or ttm is None:
            target = f"{pt.first.get('target')} {pt.first.get('metric') or ''}".strip()
            who = [FW_NAMES[fw] for fw, s in (("pytorch", pt), ("mindspore", ms)) if s.time_to_target() is None]
            best = ", ".join(f"{FW_NAMES[fw]} {_num(s.value('best_metric'))}" for fw, s in
                             (("pytorch", pt), ("mindspore", ms)) if s.value("best_metric") is not None)
            parts.append(_missing(tname, f"{' and '.join(who)} did not reach the target {target}"
                                         + (f" (best: {best})" if best else "")))
        else:
            # PyTorch time / MindSpore time above 1: MindSpore reached the target sooner.
            parts.append(_compare(tname, list(ids.values()), ttp / ttm, expect,
                                  f"{_mname(model)} time to target: PyTorch {_num(ttp)} s vs MindSpore "
                                  f"{_num(ttm)} s (PyTorch/MindSpore {ttp / ttm:.2f}; paper "
                                  f"{PAPER_TTT_RATIO[model]:.2f})"))
    return parts


def _c2(index: dict[str, CellSummary]) -> list[Part]:
    parts = []
    for model in _models(index):
        ids = {fw: _model_id(model, fw, *BASELINE[fw]) for fw in BASELINE}
        got = {fw: _lookup(index, cid) for fw, cid in ids.items()}
        name = f"{_mname(model)} first epoch"
        missing = [why for _, why in got.values() if why]
        if missing:
            parts.append(_missing(name, missing))
            continue
        frac = {}
        for fw, (s, _) in got.items():
            first, other = s.value("first_epoch_throughput"), s.value("mean_throughput_other_epochs")
            frac[fw] = first / other if first and other else None
        if None in frac.values():
            parts.append(_missing(name, "no first-epoch or later-epoch throughput (a single epoch?)"))
            continue
        ms, pt = frac["mindspore"], frac["pytorch"]
        marked, worse = ms <= MARKED_FIRST_EPOCH, ms * TIE_RATIO < pt
        ok = marked and worse
        why = ("" if ok else ": " + " and ".join(
            w for w, bad in ((f"MindSpore's is not below {MARKED_FIRST_EPOCH:.0%}", not marked),
                             ("not below PyTorch's by more than the tie margin", not worse)) if bad))
        verdict = SUPPORTS if ok else CONTRADICTS
        parts.append(Part(name, verdict, f"{_mname(model)} first-epoch throughput / mean of the other epochs: "
                                         f"{_setting('mindspore', BASELINE['mindspore'][0])} {ms:.2f}, "
                                         f"{_setting('pytorch', BASELINE['pytorch'][0])} {pt:.2f}{why} — {verdict}",
                          list(ids.values())))
    return parts


def _c3(index: dict[str, CellSummary]) -> list[Part]:
    parts = []
    for model in _models(index):
        for fw, (mode, off) in BASELINE.items():
            base_id = _model_id(model, fw, mode, off)
            for level in AMP_LEVELS[fw]:
                amp_id = _model_id(model, fw, mode, level)
                name = f"{_mname(model)} {FW_NAMES[fw]} AMP {level}"
                missing, (ta, tb, unit) = _throughputs(index, name, amp_id, base_id)
                parts.append(missing or _compare(name, [amp_id, base_id], ta / tb, "above",
                                                 f"{_mname(model)} {_setting(fw, mode)} throughput: AMP {level} "
                                                 f"{_num(ta)} vs off {_num(tb)} {unit} (AMP/off {ta / tb:.2f})"))
    return parts


def _throughputs(index: dict[str, CellSummary], name: str, a_id: str, b_id: str
                 ) -> tuple[Part | None, tuple[float, float, str]]:
    """(None, (a's, b's mean throughput of the epochs after the first, unit)), or (a `not measured` part saying
    why, (0, 0, "")) when either cell is missing, not ok, or has no such throughput."""
    (a, why_a), (b, why_b) = _lookup(index, a_id), _lookup(index, b_id)
    if why_a or why_b:
        return _missing(name, [w for w in (why_a, why_b) if w]), (0.0, 0.0, "")
    ta, tb = a.value("mean_throughput_other_epochs"), b.value("mean_throughput_other_epochs")
    if not (ta and tb):
        return _missing(name, "no mean throughput of the epochs after the first"), (0.0, 0.0, "")
    return None, (ta, tb, a.first.get("throughput_unit") or "")


def _c4(index: dict[str, CellSummary]) -> list[Part]:
    parts = []
    for model in _models(index):
        pyn_id = _model_id(model, "mindspore", "pynative", "off")
        for other_fw, other_mode in (("mindspore", "graph"), ("pytorch", BASELINE["pytorch"][0])):
            other_id = _model_id(model, other_fw, other_mode, "off")
            name = f"{_mname(model)} PyNative vs {_setting(other_fw, other_mode)}"
            missing, (tp, to, unit) = _throughputs(index, name, pyn_id, other_id)
            parts.append(missing or _compare(name, [pyn_id, other_id], tp / to, "below",
                                             f"{_mname(model)} throughput, AMP off: MindSpore PyNative {_num(tp)} vs "
                                             f"{_setting(other_fw, other_mode)} {_num(to)} {unit} "
                                             f"(ratio {tp / to:.2f})"))
    return parts


def _efficiency(index, model: str, fw: str, mode: str, amp: str, n: int) -> tuple[float | None, str, list[str]]:
    """Per-device throughput at n devices over the 1-device throughput, from the medians of both cells
    (the stored per-repeat `efficiency` only where the 1-device cell is not ok)."""
    sid, bid = _model_id(model, fw, mode, amp, n), _model_id(model, fw, mode, amp, 1)
    s, why = _lookup(index, sid)
    if why:
        return None, why, []
    b, why_b = _lookup(index, bid)
    per_dev = s.value("per_device_throughput")
    base = b.value("mean_throughput_other_epochs") if b else None
    if per_dev and base:
        return per_dev / base, f"{_num(per_dev)} per device vs {_num(base)} on 1", [sid, bid]
    if s.value("efficiency") is not None:
        return s.value("efficiency"), "stored efficiency", [sid]
    return None, why_b or f"{sid}: no per-device throughput", []


def _c5(index: dict[str, CellSummary]) -> list[Part]:
    scaling = [s for s in index.values() if s.cell.startswith("scaling/")]
    if not scaling:
        return [_missing("scaling", "no scaling cells (kind scaling, devices > 1) in the results")]
    parts = []
    combos = sorted({(c[1], c[4].removeprefix("amp-"), int(c[5].removesuffix("dev")))
                     for c in (s.cell.split("/") for s in scaling)})
    for model, amp, n in combos:
        name = f"{_mname(model)} at {n} devices, AMP {amp}"
        (ms, ms_how, ms_cells), (pt, pt_how, pt_cells) = (
            _efficiency(index, model, fw, BASELINE[fw][0], amp, n) for fw in ("mindspore", "pytorch"))
        if ms is None or pt is None:
            parts.append(_missing(name, [how for e, how in ((ms, ms_how), (pt, pt_how)) if e is None]))
            continue
        parts.append(_compare(name, ms_cells + pt_cells, ms / pt, "above",
                              f"{_mname(model)} scaling efficiency at {n} devices, AMP {amp}: "
                              f"{_setting('mindspore', BASELINE['mindspore'][0])} {ms:.2f} ({ms_how}) vs "
                              f"{_setting('pytorch', BASELINE['pytorch'][0])} {pt:.2f} ({pt_how}) "
                              f"(MindSpore/PyTorch {ms / pt:.2f})"))
    return parts


# -- operators ---------------------------------------------------------------------------------------------------
@dataclass
class OpRatio:
    op: str
    dtype: str
    direction: str
    shape: dict[str, Any]
    params: int
    ms_mode: str
    pytorch: float
    mindspore: float
    cells: list[str]

    @property
    def ratio(self) -> float:
        return self.mindspore / self.pytorch


def operator_ratios(index: dict[str, CellSummary]) -> list[OpRatio]:
    """MindSpore/PyTorch eager throughput per operator configuration; per (op, dtype, direction) the
    MindSpore mode is the first of OP_MS_MODES with any configuration measured in both frameworks."""
    cfg: dict[tuple, dict[str, CellSummary]] = {}
    for s in index.values():
        r = s.first
        if r.get("kind") != "operator" or not s.ok or s.value("throughput") is None:
            continue
        key = (r["op"], r.get("dtype"), r.get("direction"), tuple(sorted((r.get("shape") or {}).items())))
        cfg.setdefault(key, {})[f"{r['framework']}/{r['mode']}"] = s
    groups: dict[tuple, list[OpRatio]] = {}
    for (op, dtype, direction, shape), by in sorted(cfg.items(), key=lambda kv: str(kv[0])):
        pt = by.get(f"pytorch/{OP_PT_MODE}")
        for mode in OP_MS_MODES:
            ms = by.get(f"mindspore/{mode}")
            if pt and ms:
                groups.setdefault((op, dtype, direction, mode), []).append(OpRatio(
                    op, dtype, direction, dict(shape), int(pt.first.get("params") or 0), mode,
                    pt.value("throughput"), ms.value("throughput"), [ms.cell, pt.cell]))
    out = []
    for (op, dtype, direction) in sorted({k[:3] for k in groups}):
        mode = next(m for m in OP_MS_MODES if (op, dtype, direction, m) in groups)
        out.extend(groups[(op, dtype, direction, mode)])
    return sorted(out, key=lambda o: (o.op, o.dtype, o.direction, o.params))


def _op_missing(index: dict[str, CellSummary], op: str | None) -> str:
    cells = [s for s in index.values() if s.cell.startswith("operator/" + (f"{op}/" if op else ""))]
    what = f"{op} " if op else ""
    if not cells:
        return f"no {what}operator cells in the results"
    bad = [s for s in cells if not s.ok]
    first = f" (e.g. {bad[0].why_not()})" if bad else ""
    return (f"no {what}configuration measured ok in both PyTorch {OP_PT_MODE} and MindSpore "
            f"{' or '.join(m.upper() for m in OP_MS_MODES)}: {len(bad)} of {len(cells)} {what}cells not ok{first}")


def _levels(ratios: list[OpRatio]) -> list[int]:
    return sorted({o.params for o in ratios})


def _describe(ratios: list[OpRatio]) -> str:
    return ", ".join(f"{o.op} {o.params:,} params {o.ratio:.2f}" for o in ratios)


def _spearman(xs: list[float], ys: list[float]) -> float | None:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else None


def _by_group(ratios: list[OpRatio], by_op: bool = False) -> dict[tuple, list[OpRatio]]:
    out: dict[tuple, list[OpRatio]] = {}
    for o in ratios:
        out.setdefault((o.op, o.dtype, o.direction) if by_op else (o.dtype, o.direction), []).append(o)
    return out


def _sized_groups(ratios: list[OpRatio], too_few: str) -> tuple[list[Part], list[tuple[str, list[OpRatio], list[int]]]]:
    """Per (operator, dtype, direction): the configurations and their distinct parameter counts, or, where there are
    fewer than MIN_PARAM_LEVELS counts, a `not measured` part saying `too_few` (formatted with n)."""
    parts, groups = [], []
    for (op, dtype, direction), rs in _by_group(ratios, by_op=True).items():
        name, levels = f"{op} {dtype} {direction}", _levels(rs)
        if len(levels) < MIN_PARAM_LEVELS:
            parts.append(_missing(name, too_few.format(n=len(levels))))
        else:
            groups.append((name, rs, levels))
    return parts, groups


def _mode_note(rs: list[OpRatio]) -> str:
    modes = sorted({o.ms_mode for o in rs})
    return f"MindSpore {'/'.join(m.upper() for m in modes)} / PyTorch {OP_PT_MODE}"


def _o1(index: dict[str, CellSummary]) -> list[Part]:
    ratios = operator_ratios(index)
    if not ratios:
        return [_missing("operators", _op_missing(index, None))]
    parts = []
    seen = {s.cell.split("/")[1] for s in index.values() if s.cell.startswith("operator/")}
    for op in sorted(seen - {o.op for o in ratios}):
        parts.append(_missing(op, _op_missing(index, op)))
    missing, groups = _sized_groups(ratios, "only {n} distinct parameter count: no trend to see")
    parts += missing
    for name, rs, levels in groups:
        k = max(1, len(levels) // TERCILE)
        low = [o for o in rs if o.params in levels[:k]]
        high = [o for o in rs if o.params in levels[-k:]]
        lo, hi = median(o.ratio for o in low), median(o.ratio for o in high)
        rho = _spearman([o.params for o in rs], [o.ratio for o in rs])
        parts.append(_compare(name, [c for o in rs for c in o.cells], hi / lo, "above",
                              f"{name}, {_mode_note(rs)}: median ratio {lo:.2f} at the fewest "
                              f"parameters [{_describe(low)}], {hi:.2f} at the most [{_describe(high)}]; "
                              f"most/fewest {hi / lo:.2f}"
                              + (f"; Spearman rho(params, ratio) {rho:+.2f} over {len(rs)} configurations"
                                 if rho is not None else "")))
    return parts


def _o2(index: dict[str, CellSummary]) -> list[Part]:
    ratios = [o for o in operator_ratios(index) if o.op == "batchnorm2d"]
    if not ratios:
        return [_missing("batchnorm2d", _op_missing(index, "batchnorm2d"))]
    parts, groups = _sized_groups(ratios, "only {n} BatchNorm size: cannot tell small from large")
    for name, rs, levels in groups:
        dtype, direction = rs[0].dtype, rs[0].direction
        small = [o for o in rs if o.params in levels[:max(1, len(levels) // 2)]]
        m = median(o.ratio for o in small)
        parts.append(_compare(name, [c for o in small for c in o.cells], m, "above",
                              f"BatchNorm2d {dtype} {direction}, {_mode_note(rs)}: median ratio {m:.2f} over the "
                              f"smaller half of the sizes [{_describe(small)}]"))
    return parts


def _o3(index: dict[str, CellSummary]) -> list[Part]:
    ratios = [o for o in operator_ratios(index) if o.op == "conv2d"]
    if not ratios:
        return [_missing("conv2d", _op_missing(index, "conv2d"))]
    parts, groups = _sized_groups(ratios, "only {n} Conv2d size: cannot tell large from small")
    for name, rs, levels in groups:
        dtype, direction = rs[0].dtype, rs[0].direction
        k = max(1, len(levels) // TERCILE)
        large = [o for o in rs if o.params in levels[-k:]]
        rest = [o for o in rs if o.params not in levels[-k:]]
        ml, mr = median(o.ratio for o in large), median(o.ratio for o in rest)
        ahead_large, ahead_rest = _side(ml) == "above", _side(mr) == "above"
        verdict = SUPPORTS if ahead_large and not ahead_rest else CONTRADICTS
        fails = [w for w, bad in (("MindSpore not ahead even at the largest", not ahead_large),
                                  ("MindSpore ahead at smaller sizes too", ahead_rest)) if bad]
        parts.append(Part(name, verdict,
                          f"Conv2d {dtype} {direction}, {_mode_note(rs)}: median ratio {ml:.2f} at the largest "
                          f"[{_describe(large)}] vs {mr:.2f} at the others [{_describe(rest)}]"
                          + (f" ({'; '.join(fails)})" if fails else "") + f" — {verdict}",
                          [c for o in rs for c in o.cells]))
    return parts


RULES = {"C1": _c1, "C2": _c2, "C3": _c3, "C4": _c4, "C5": _c5, "O1": _o1, "O2": _o2, "O3": _o3}


# -- verdicts ------------------------------------------------------------------------------------------------------
def _verdict(parts: list[Part]) -> tuple[str, str]:
    measured = [p for p in parts if p.outcome != NOT_MEASURED]
    missing = [p for p in parts if p.outcome == NOT_MEASURED]
    unmeasured = "; ".join(p.detail for p in missing)
    if not measured:
        return "not measured", unmeasured or "no results for this claim"
    n_sup = sum(p.outcome == SUPPORTS for p in measured)
    verdict = ("supported" if n_sup == len(measured) else "contradicted" if n_sup == 0 else "mixed")
    against = [p.name for p in measured if p.outcome != SUPPORTS]
    reason = f"{n_sup} of {len(measured)} measured comparisons agree with the paper"
    if against:
        reason += f" (not: {', '.join(against)})"
    if missing:
        reason += f"; not measured: {unmeasured}"
    return verdict, reason


def _caveats(index: dict[str, CellSummary], cells: list[str], parts: list[Part], platform: str | None,
             profile: str | None) -> list[str]:
    out = []
    if platform and platform != PAPER_PLATFORM:
        out.append(f"measured on {platform}, not on the Ascend 910 NPUs of the paper: the verdict says how the "
                   f"frameworks compare on {platform}, not whether the paper's Ascend result holds")
    if profile == "quick":
        out.append("quick profile: small data slices, few epochs and few operator configurations")
    used = [index[c] for c in dict.fromkeys(cells) if c in index]
    synthetic = sorted({f"{_mname(s.first.get('model') or '')} ({s.first.get('dataset')})" for s in used
                        if any(r.get("synthetic") for r in s.ok)})
    if synthetic:
        out.append(f"synthetic data for {', '.join(synthetic)}: throughput is comparable, accuracy and time to "
                   f"target are not")
    if used and min(len(s.ok) for s in used) == 1:
        out.append(f"one repeat per cell: no spread; the ±{TIE_RATIO - 1:.0%} tie margin is the only allowance "
                   f"for noise")
    partial = [f"{s.cell} ({len(s.ok)} of {len(s.ok) + len(s.not_ok)} repeats ok)" for s in used if s.not_ok]
    if partial:
        out.append("medians over the ok repeats only: " + ", ".join(partial))
    versions = {}
    for s in used:
        for k, v in (s.first.get("versions") or {}).items():
            if k in ("torch", "mindspore") and v:
                versions[k] = v
    if versions:
        out.append(f"framework versions {', '.join(f'{k} {v}' for k, v in sorted(versions.items()))}; the paper "
                   f"used PyTorch {PAPER_VERSIONS['pytorch']} and MindSpore {PAPER_VERSIONS['mindspore']}")
    missing = [p for p in parts if p.outcome == NOT_MEASURED]
    if missing and len(missing) < len(parts):
        out.append(f"only {len(parts) - len(missing)} of {len(parts)} comparisons measured")
    return out


def evaluate(results: Iterable[dict[str, Any]], *, platform: str | None = None,
             profile: str | None = None) -> list[Claim]:
    """Every claim's verdict from one platform's results (ValueError if they span several and none is named).
    `profile` ("quick"/"full"), where known, only adds a caveat."""
    chosen, platform = _select(list(results), platform)
    index = summarise(chosen)
    claims = []
    for cid, rule in RULES.items():
        parts = rule(index)
        verdict, reason = _verdict(parts)
        cells = list(dict.fromkeys(c for p in parts for c in p.cells))
        title, paper = TITLES[cid]
        caveats = _caveats(index, cells, parts, platform, profile)
        if cid == "C5":
            counts = sorted({int(c.rsplit("/", 1)[1].removesuffix("dev")) for c in cells})
            if counts and counts[-1] < PAPER_MAX_DEVICES:
                caveats.append(f"device counts measured: {', '.join(map(str, counts))} (paper: up to "
                               f"{PAPER_MAX_DEVICES})")
        claims.append(Claim(cid, title, paper, verdict, reason,
                            evidence=[p.detail for p in parts if p.outcome != NOT_MEASURED],
                            cells=cells, caveats=caveats, parts=parts))
    return claims


def evaluate_by_platform(results: Iterable[dict[str, Any]], *, profile: str | None = None) -> dict[str, list[Claim]]:
    results = list(results)
    return {p: evaluate(results, platform=p, profile=profile) for p in platforms(results) or [None]}


def time_to_target_table(results: Iterable[dict[str, Any]], *, platform: str | None = None) -> list[dict[str, Any]]:
    """Per model: time to target of PyTorch eager and MindSpore GRAPH (AMP off, 1 device), the measured
    PyTorch/MindSpore time ratio (None unless both reached the target) and the paper's (PAPER_TTT_RATIO)."""
    chosen, _ = _select(list(results), platform)
    index = summarise(chosen)
    rows = []
    for model in _models(index):
        row: dict[str, Any] = {"model": model, "title": _mname(model), "paper_ratio": PAPER_TTT_RATIO.get(model),
                               "setting": f"{_setting('pytorch', BASELINE['pytorch'][0])} vs "
                                          f"{_setting('mindspore', BASELINE['mindspore'][0])}, AMP off, 1 device",
                               "metric": None, "target": None, "notes": []}
        for fw in ("pytorch", "mindspore"):
            cid = _model_id(model, fw, *BASELINE[fw])
            s, why = _lookup(index, cid)
            row[f"{fw}_cell"] = cid
            row[f"{fw}_s"] = s.time_to_target() if s else None
            row[f"{fw}_best_metric"] = s.value("best_metric") if s else None
            if s:
                row["metric"], row["target"] = s.first.get("metric"), s.first.get("target")
                if row[f"{fw}_s"] is None:
                    row["notes"].append(f"{FW_NAMES[fw]} did not reach the target")
            else:
                row["notes"].append(why)
        row["ratio"] = (row["pytorch_s"] / row["mindspore_s"]
                        if row["pytorch_s"] is not None and row["mindspore_s"] is not None else None)
        if any(index.get(row[f"{fw}_cell"]) for fw in ("pytorch", "mindspore")) or model in PAPER_TTT_RATIO:
            rows.append(row)
    return rows
