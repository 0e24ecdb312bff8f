"""The claims about whole models (C1-C5). A rule that is one throughput comparison per model is a row of data
(a `Comparison`: which two cells, which side of 1 their ratio should lie on, how to say it); the rules that need
more (C1's time to target, C2's first epoch, C5's scaling efficiency) stay code."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.claims.common import (
    CONTRADICTS,
    SUPPORTS,
    Part,
    Repeats,
    _compare,
    _lookup,
    _missing,
    _mname,
    _model_id,
    _models,
    _num,
    _setting,
)
from harness.claims.paper import (
    AMP_LEVELS,
    BASELINE,
    FW_NAMES,
    INCONCLUSIVE,
    MARKED_FIRST_EPOCH,
    PAPER_FASTER,
    PAPER_TTT_RATIO,
    TIE_RATIO,
)
from harness.config import cellid
from harness.results import arith, measure
from harness.results.measure import LEVEL, interval_text

MS_BASE, PT_BASE = BASELINE["mindspore"][0], BASELINE["pytorch"][0]


@dataclass(frozen=True)
class Comparison:
    """a's mean throughput of the epochs after the first over b's, per model: supports the claim when the ratio lies
    on the `expect` side of 1 beyond the tie margin ("paper": the side of the framework the paper found faster).
    `name` and `text` are templates: {m} the model, {ta} {tb} {unit} {r} the numbers, {faster} the paper's faster
    framework, and the row's own `words`."""

    name: str
    a: tuple[str, str, str]        # framework, mode, amp
    b: tuple[str, str, str]
    expect: str                    # above | below | paper
    text: str
    words: dict[str, str] = field(default_factory=dict)
    no_value: str = "no mean throughput of the epochs after the first"
    b_first: bool = False          # list b's cell before a's among the evidence cells


C1_THROUGHPUT = Comparison(
    "{m} throughput", ("mindspore", *BASELINE["mindspore"]), ("pytorch", *BASELINE["pytorch"]), "paper",
    "{m} mean throughput of the epochs after the first: {ms} {ta} vs {pt} {tb} {unit} "
    "(MindSpore/PyTorch {r:.2f}; paper: {faster} faster)",
    {"ms": _setting("mindspore", MS_BASE), "pt": _setting("pytorch", PT_BASE)},
    no_value="no mean throughput of the epochs after the first (a single epoch?)", b_first=True)
C3_ROWS = [Comparison("{m} {fw} AMP {level}", (fw, mode, level), (fw, mode, off), "above",
                      "{m} {setting} throughput: AMP {level} {ta} vs off {tb} {unit} (AMP/off {r:.2f})",
                      {"fw": FW_NAMES[fw], "level": level, "setting": _setting(fw, mode)})
           for fw, (mode, off) in BASELINE.items() for level in AMP_LEVELS[fw]]
C4_ROWS = [Comparison("{m} PyNative vs {other}", ("mindspore", "pynative", "off"), (fw, mode, "off"), "below",
                      "{m} throughput, AMP off: MindSpore PyNative {ta} vs {other} {tb} {unit} (ratio {r:.2f})",
                      {"other": _setting(fw, mode)})
           for fw, mode in (("mindspore", "graph"), ("pytorch", PT_BASE))]


def _row(index: dict[str, Repeats], row: Comparison, model: str) -> Part:
    words = {"m": _mname(model), "faster": FW_NAMES.get(PAPER_FASTER.get(model, ""), "?"), **row.words}
    name = row.name.format(**words)
    a_id, b_id = _model_id(model, *row.a), _model_id(model, *row.b)
    (a, why_a), (b, why_b) = _lookup(index, a_id), _lookup(index, b_id)
    if why_a or why_b:
        return _missing(name, [w for w in (why_a, why_b) if w])
    ta, tb = a.value("mean_throughput_other_epochs"), b.value("mean_throughput_other_epochs")
    if not (ta and tb):
        return _missing(name, row.no_value)
    expect = row.expect if row.expect != "paper" else "above" if PAPER_FASTER[model] == "mindspore" else "below"
    r = ta / tb
    key = "mean_throughput_other_epochs"
    interval = measure.ratio_interval(a.measure(key), b.measure(key))
    return _compare(name, [b_id, a_id] if row.b_first else [a_id, b_id], r, expect, row.text.format(
        **words, ta=_num(ta), tb=_num(tb), unit=a.first.get("throughput_unit") or "", r=r), interval)


def _rows(rows: list[Comparison]):
    def rule(index: dict[str, Repeats]) -> list[Part]:
        return [_row(index, row, model) for model in _models(index) for row in rows]
    return rule


def _c1(index: dict[str, Repeats]) -> list[Part]:
    parts = []
    for model in _models(index):
        faster = PAPER_FASTER.get(model)
        if faster is None:
            continue
        ids = {fw: _model_id(model, fw, *BASELINE[fw]) for fw in BASELINE}
        got = {fw: _lookup(index, cid) for fw, cid in ids.items()}
        missing = [why for _, why in got.values() if why]
        expect = "above" if faster == "mindspore" else "below"
        if missing:
            parts.append(_missing(_mname(model), missing))
            continue
        pt, ms = got["pytorch"][0], got["mindspore"][0]
        parts.append(_row(index, C1_THROUGHPUT, model))
        ttp, ttm = pt.time_to_target.median, ms.time_to_target.median
        tname = f"{_mname(model)} time to target"
        if ttp is None or ttm is None:
            target = f"{pt.first.get('target')} {pt.first.get('metric') or ''}".strip()
            who = [FW_NAMES[fw] for fw, s in (("pytorch", pt), ("mindspore", ms)) if s.time_to_target.median is None]
            best = ", ".join(f"{FW_NAMES[fw]} {_num(s.value('best_metric'))}" for fw, s in
                             (("pytorch", pt), ("mindspore", ms)) if s.value("best_metric") is not None)
            parts.append(_missing(tname, f"{' and '.join(who)} did not reach the target {target}"
                                         + (f" (best: {best})" if best else "")))
        else:
            # PyTorch time / MindSpore time above 1: MindSpore reached the target sooner.
            parts.append(_compare(tname, list(ids.values()), ttp / ttm, expect,
                                  f"{_mname(model)} time to target: PyTorch {_num(ttp)} s vs MindSpore "
                                  f"{_num(ttm)} s (PyTorch/MindSpore {ttp / ttm:.2f}; paper "
                                  f"{PAPER_TTT_RATIO[model]:.2f})",
                                  measure.ratio_interval(pt.time_to_target, ms.time_to_target)))
    return parts


def _first_fraction(r: dict) -> float | None:
    """One repeat's first-epoch throughput over its mean of the other epochs (C2), None without both."""
    first, other = r.get("first_epoch_throughput"), r.get("mean_throughput_other_epochs")
    return first / other if first and other else None


def _test(interval, passes) -> bool | None:
    """True/False where both ends of an interval pass/fail a test, None (inconclusive) where they differ."""
    lo, hi = interval
    ends = {passes(lo), passes(math.inf if hi is None else hi)}
    return ends.pop() if len(ends) == 1 else None


def _c2(index: dict[str, Repeats]) -> list[Part]:
    """MindSpore's first epoch is marked (its fraction first / other epochs at most MARKED_FIRST_EPOCH) and worse
    than PyTorch's beyond the tie margin. With repeats, both tests are decided by intervals (harness.results.measure):
    the interval of MindSpore's median fraction against the threshold, and that of the ratio of the two frameworks'
    median fractions against the tie band; an interval on both sides of its line makes the part inconclusive."""
    parts = []
    for model in _models(index):
        ids = {fw: _model_id(model, fw, *BASELINE[fw]) for fw in BASELINE}
        got = {fw: _lookup(index, cid) for fw, cid in ids.items()}
        name = f"{_mname(model)} first epoch"
        missing = [why for _, why in got.values() if why]
        if missing:
            parts.append(_missing(name, missing))
            continue
        sample = {fw: s.measure(_first_fraction) for fw, (s, _) in got.items()}
        if any(x.median is None for x in sample.values()):
            parts.append(_missing(name, "no first-epoch or later-epoch throughput (a single epoch?)"))
            continue
        ms, pt = sample["mindspore"].median, sample["pytorch"].median
        marked, worse = ms <= MARKED_FIRST_EPOCH, ms * TIE_RATIO < pt
        iv_ms = measure.quotient_interval((sample["mindspore"],))
        iv_ratio = measure.ratio_interval(sample["mindspore"], sample["pytorch"])
        ends = ""
        if iv_ms is not None and iv_ratio is not None:
            marked = _test(iv_ms, lambda x: x <= MARKED_FIRST_EPOCH)
            worse = _test(iv_ratio, lambda x: x * TIE_RATIO < 1)
            ends = (f" ({LEVEL:.0%} intervals: MindSpore's {interval_text(iv_ms)}, MindSpore/PyTorch "
                    f"{interval_text(iv_ratio)})")
        if marked and worse:
            verdict, why = SUPPORTS, ""
        else:
            # A test that failed (False) contradicts; otherwise the undecided ones (None) make it inconclusive.
            verdict, shown = (CONTRADICTS, False) if False in (marked, worse) else (INCONCLUSIVE, None)
            words = {False: (f"MindSpore's is not below {MARKED_FIRST_EPOCH:.0%}",
                             "not below PyTorch's by more than the tie margin"),
                     None: (f"MindSpore's interval reaches across {MARKED_FIRST_EPOCH:.0%}",
                            "the ratio's interval reaches across the tie margin")}[shown]
            why = ": " + " and ".join(w for w, test in zip(words, (marked, worse), strict=True) if test is shown)
        parts.append(Part(name, verdict, f"{_mname(model)} first-epoch throughput / mean of the other epochs: "
                                         f"{_setting('mindspore', BASELINE['mindspore'][0])} {ms:.2f}, "
                                         f"{_setting('pytorch', BASELINE['pytorch'][0])} {pt:.2f}{ends}{why} — "
                                         f"{verdict}", list(ids.values()), iv_ratio if ends else None))
    return parts


def _efficiency(index, model: str, fw: str, mode: str, amp: str, n: int, nodes: int = 1):
    """Per-device throughput at n devices over the 1-device throughput, from the medians of both cells
    (the stored per-repeat `efficiency` only where the 1-device cell is not ok); with the two Samples it is made of,
    (per-device, 1-device), for C5's interval (None with the stored efficiency)."""
    sid, bid = _model_id(model, fw, mode, amp, n, nodes), _model_id(model, fw, mode, amp, 1)
    s, why = _lookup(index, sid)
    if why:
        return None, why, [], None
    b, why_b = _lookup(index, bid)
    per_dev = s.value("per_device_throughput")
    base = b.value("mean_throughput_other_epochs") if b else None
    if per_dev and base:
        return (arith.efficiency(per_dev, base), f"{_num(per_dev)} per device vs {_num(base)} on 1", [sid, bid],
                (s.measure("per_device_throughput"), b.measure("mean_throughput_other_epochs")))
    if s.value("efficiency") is not None:
        return s.value("efficiency"), "stored efficiency", [sid], None
    return None, why_b or f"{sid}: no per-device throughput", [], None


def _c5(index: dict[str, Repeats]) -> list[Part]:
    scaling = [s for s in index.values() if s.cell.startswith("scaling/")]
    if not scaling:
        return [_missing("scaling", "no scaling cells (kind scaling, devices > 1) in the results")]
    parts = []
    # Devices as the report writes them: 4, or 4 (2 nodes x 2) for a cell over several hosts.
    combos = sorted({(c.model, c.amp, c.devices, c.nodes) for c in (cellid.parse(s.cell) for s in scaling)})
    for model, amp, n, nodes in combos:
        devices = cellid.devices_label(n, nodes)
        name = f"{_mname(model)} at {devices} devices, AMP {amp}"
        (ms, ms_how, ms_cells, ms_parts), (pt, pt_how, pt_cells, pt_parts) = (
            _efficiency(index, model, fw, BASELINE[fw][0], amp, n, nodes) for fw in ("mindspore", "pytorch"))
        if ms is None or pt is None:
            parts.append(_missing(name, [how for e, how in ((ms, ms_how), (pt, pt_how)) if e is None]))
            continue
        # MindSpore's efficiency over PyTorch's: (per-device MS / 1-device MS) / (per-device PT / 1-device PT).
        interval = (measure.quotient_interval((ms_parts[0], pt_parts[1]), (ms_parts[1], pt_parts[0]))
                    if ms_parts and pt_parts else None)
        parts.append(_compare(name, ms_cells + pt_cells, ms / pt, "above",
                              f"{_mname(model)} scaling efficiency at {devices} devices, AMP {amp}: "
                              f"{_setting('mindspore', BASELINE['mindspore'][0])} {ms:.2f} ({ms_how}) vs "
                              f"{_setting('pytorch', BASELINE['pytorch'][0])} {pt:.2f} ({pt_how}) "
                              f"(MindSpore/PyTorch {ms / pt:.2f})", interval))
    return parts


def compared_settings() -> frozenset[tuple[str, str, str]]:
    """(framework, mode, amp) of the 1-device model cells C1-C4 compare, read from their own definitions (the fair
    baseline of C1, C2 and the time to target, and the rows of C1's throughput, C3 and C4): the cells a profile's
    `claim_repeats` repeat (harness.config.matrix), so that each of their ratios has an interval."""
    rows = (C1_THROUGHPUT, *C3_ROWS, *C4_ROWS)
    return frozenset({s for row in rows for s in (row.a, row.b)} | {(fw, *BASELINE[fw]) for fw in BASELINE})


def scaled_settings() -> frozenset[tuple[str, str]]:
    """(framework, mode) of the scaling cells C5 compares (each framework's fair baseline mode, at any AMP level):
    with the 1-device cells of compared_settings, the cells whose `claim_repeats` give C5's ratio an interval."""
    return frozenset((fw, mode) for fw, (mode, _) in BASELINE.items())


_c3 = _rows(C3_ROWS)
_c4 = _rows(C4_ROWS)
RULES = {"C1": _c1, "C2": _c2, "C3": _c3, "C4": _c4, "C5": _c5}
