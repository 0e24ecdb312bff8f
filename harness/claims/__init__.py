"""The paper's conclusions as rules: which ones a set of results supports, contradicts, or cannot judge.
 Input is the list of result dicts `python -m harness results RUN --json` prints (one per cell and repeat,
from one or several runs). Only `status == "ok"` results count; a cell's value is the median over its ok
repeats. Results from several platforms are never mixed: `evaluate` takes one platform (or refuses
results from several), `evaluate_by_platform` evaluates each.

Verdicts (VERDICTS):
  supported     every measured part of the claim agrees with the paper
  contradicted  no measured part agrees (a tie counts as not agreeing: the claim is that one side is ahead)
  inconclusive  a part is inconclusive when its ratio's interval over the repeats (harness.results.measure.
                ratio_interval, 2 repeats a side or more) reaches across an edge of the ±5% tie band, so the
                repeats cannot say which side of it the ratio lies on. The claim is inconclusive when the way its
                inconclusive parts fall would decide the verdict: every part inconclusive, or the conclusive ones
                all agreeing (or all disagreeing) beside an inconclusive one (supported or mixed, as it falls).
                Conclusive parts that go both ways make the claim mixed whatever the others do. `reason` names the
                inconclusive parts. Without repeats (one a side) there is no interval and no part is inconclusive.
  mixed         some parts agree and some do not. The claims are conjunctions (C1 is three models with
                opposite expectations, C3 two frameworks at several AMP levels, O1-O3 several operator
                directions/dtypes); on real data one model can confirm what another refutes, and folding
                that into supported or contradicted would hide half of the evidence. The evidence lists
                which part went which way.
  not measured  no part of the claim could be evaluated; `reason` names the cells that are missing,
                failed, skipped or timed out.
A claim whose measured parts all agree but some parts were not measured is `supported`, with the
unmeasured parts in `reason` and its `caveats`.

Fair settings (the paper's defaults, PyTorch 1.8.1 had no torch.compile): PyTorch eager vs MindSpore GRAPH,
AMP off, 1 device, unless a claim is about another mode or AMP level. Operators: MindSpore GRAPH (PYNATIVE
only where GRAPH was not measured, said in the evidence) against PyTorch eager, same op/shape/dtype/direction.
 The verdict does not depend on the platform, profile, data or number of repeats; those are caveats:
a contradiction measured on a CPU says something about CPUs, not about the Ascend 910 the paper used. One function
(`_caveats`) builds them, in two places so that each is said once: what holds for the whole platform's run
(`run_caveats`: the platform and the framework versions against the paper's, the profile, how the intervals are
made, one repeat per cell where every claim has it) and what is a claim's own (`Claim.caveats`: synthetic data for
the models it used, medians over partial repeats of its cells, only k of n comparisons measured, C5's device counts,
one repeat per cell where only some claims have it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.claims import models, operators
from harness.claims.common import (
    CONTRADICTS,
    INCONCLUSIVE,
    NOT_MEASURED,
    SUPPORTS,
    Claim,
    Part,
    _lookup,
    _mname,
    _model_id,
    _models,
    _parsed,
    _select,
    _setting,
    platforms,
)
from harness.claims.operators import OpRatio, paired_ratios
from harness.claims.paper import (
    BASELINE,
    FW_NAMES,
    MARKED_FIRST_EPOCH,
    PAPER_MAX_DEVICES,
    PAPER_PLATFORM,
    PAPER_TTT_RATIO,
    PAPER_VERSIONS,
    TIE_RATIO,
    TITLES,
    VERDICTS,
)
from harness.results.measure import LEVEL, RESAMPLES, Repeats, ratio_interval, summarise

__all__ = ["CONTRADICTS", "INCONCLUSIVE", "MARKED_FIRST_EPOCH", "NOT_MEASURED", "SUPPORTS", "TIE_RATIO", "TITLES",
           "VERDICTS", "Claim", "OpRatio", "Part", "Repeats", "evaluate", "evaluate_by_platform", "paired_ratios",
           "platforms", "run_caveats", "summarise", "time_to_target_table"]

RULES = {**models.RULES, **operators.RULES}


def _verdict(parts: list[Part]) -> tuple[str, str]:
    measured = [p for p in parts if p.outcome != NOT_MEASURED]
    missing = [p for p in parts if p.outcome == NOT_MEASURED]
    unmeasured = "; ".join(p.detail for p in missing)
    if not measured:
        return "not measured", unmeasured or "no results for this claim"
    unsure = [p.name for p in measured if p.outcome == INCONCLUSIVE]
    conclusive = [p for p in measured if p.outcome != INCONCLUSIVE]
    n_sup = sum(p.outcome == SUPPORTS for p in conclusive)
    n_con = len(conclusive) - n_sup
    # A verdict is conclusive only where every way the inconclusive parts could fall gives it: one part for the
    # paper and one against make "mixed" whatever the others do; all the conclusive parts one way beside an
    # inconclusive part could still end "supported" or "mixed" (or "contradicted" or "mixed"), so it is inconclusive.
    # Two runs of the same code then never give two different conclusive verdicts because one part's interval
    # reached across the tie band in one of them.
    verdict = ("mixed" if n_sup and n_con else INCONCLUSIVE if unsure or not conclusive
               else "supported" if n_con == 0 else "contradicted")
    against = [p.name for p in conclusive if p.outcome != SUPPORTS]
    reason = f"{n_sup} of {len(measured)} measured comparisons agree with the paper"
    if against:
        reason += f" (not: {', '.join(against)})"
    if unsure:
        reason += f"; inconclusive (interval across the tie band): {', '.join(unsure)}"
        if conclusive and verdict == INCONCLUSIVE:
            reason += (f": {'supported' if n_con == 0 else 'contradicted'} or mixed, as they fall, so no verdict "
                       f"until they are settled")
    if missing:
        reason += f"; not measured: {unmeasured}"
    return verdict, reason


def _caveats(index: dict[str, Repeats], used: dict[str, tuple[list[str], list[Part]]], platform: str | None,
             profile: str | None) -> tuple[list[str], dict[str, list[str]]]:
    """The one place the caveats are built, from every claim's cells and parts (`used`, by claim id): those that
    hold for the whole platform's run (stated once: `run_caveats`), and each claim's own (`Claim.caveats`)."""
    run = []
    if platform and platform != PAPER_PLATFORM:
        run.append(f"measured on {platform}, not on the Ascend 910 NPUs of the paper: the verdict says how the "
                   f"frameworks compare on {platform}, not whether the paper's Ascend result holds")
    if profile == "quick":
        run.append("quick profile: small data slices, few epochs and few operator configurations")
    if profile == "target":
        run.append("target profile: models sized to reach their targets on a 2-core CPU (the GRU smaller than the "
                   "paper's, its source reversed), each cell stopping at its target")
    cells_of = {cid: [index[c] for c in dict.fromkeys(cells) if c in index] for cid, (cells, _) in used.items()}
    one_repeat = {cid for cid, cs in cells_of.items() if cs and min(len(s.ok) for s in cs) == 1}
    no_spread = (f"one repeat per cell: no spread; the ±{TIE_RATIO - 1:.0%} tie margin is the only allowance for "
                 f"noise")
    # Said once where it holds for every claim that used a cell; otherwise under the claims it holds for.
    everywhere = bool(one_repeat) and one_repeat == {cid for cid, cs in cells_of.items() if cs}
    if everywhere:
        run.append(no_spread)
    with_interval = [p for _, parts in used.values() for p in parts if p.interval is not None]
    if with_interval:
        # At n repeats a side the interval spans the extreme ratios and covers the truth 1 - 2/C(2n, n) of the time
        # for any continuous noise (harness/launch/sequential.py): say so where a verdict rests on that few.
        fewest = min(min((len(index[c].ok) for c in p.cells if c in index), default=0) for p in with_interval)
        cover = {2: "about 2 times in 3", 3: "about 9 times in 10"}.get(fewest)
        run.append(f"{LEVEL:.0%} intervals of the ratios: percentile bootstrap over each cell's repeats "
                   f"({RESAMPLES} resamples, fixed seed); an interval across an edge of the ±{TIE_RATIO - 1:.0%} tie "
                   f"band is inconclusive"
                   + (f"; with {fewest} repeats a side such an interval covers the true ratio {cover}, not "
                      f"{LEVEL:.0%}" + (": a verdict resting on 2 repeats is a first reading, and --max-repeats 3 "
                                        "gives the comparisons not yet settled a third" if fewest == 2 else "")
                      if cover else ""))
    versions: dict[str, list[str]] = {}
    for s in {s.cell: s for cs in cells_of.values() for s in cs}.values():
        for k, v in (s.first.get("versions") or {}).items():
            if k in ("torch", "mindspore") and v and v not in versions.setdefault(k, []):
                versions[k].append(v)
    if versions:
        seen = ", ".join(f"{k} {' and '.join(sorted(v))}" for k, v in sorted(versions.items()))
        run.append(f"framework versions {seen}; the paper used PyTorch {PAPER_VERSIONS['pytorch']} and MindSpore "
                   f"{PAPER_VERSIONS['mindspore']}")
    own = {}
    for cid, (cells, parts) in used.items():
        out = own[cid] = []
        synthetic = sorted({f"{_mname(s.first.get('model') or '')} ({s.first.get('dataset')})" for s in cells_of[cid]
                            if any(r.get("synthetic") for r in s.ok)})
        if synthetic:
            out.append(f"synthetic data for {', '.join(synthetic)}: throughput is comparable, accuracy and time to "
                       f"target are not")
        if cid in one_repeat and not everywhere:
            out.append(no_spread)
        partial = [f"{s.cell} ({len(s.ok)} of {len(s.ok) + len(s.not_ok)} repeats ok)" for s in cells_of[cid]
                   if s.not_ok]
        if partial:
            out.append("medians over the ok repeats only: " + ", ".join(partial))
        missing = [p for p in parts if p.outcome == NOT_MEASURED]
        if missing and len(missing) < len(parts):
            out.append(f"only {len(parts) - len(missing)} of {len(parts)} comparisons measured")
        if cid == "C5":
            counts = sorted({c.devices for c in map(_parsed, cells) if c is not None})
            if counts and counts[-1] < PAPER_MAX_DEVICES:
                out.append(f"device counts measured: {', '.join(map(str, counts))} (paper: up to "
                           f"{PAPER_MAX_DEVICES})")
    return run, own


def _used(parts: list[Part]) -> list[str]:
    return list(dict.fromkeys(c for p in parts for c in p.cells))


def evaluate(results: Iterable[dict[str, Any]], *, platform: str | None = None,
             profile: str | None = None) -> list[Claim]:
    """Every claim's verdict from one platform's results (ValueError if they span several and none is named).
    `profile` ("quick"/"full"), where known, only adds a caveat (to `run_caveats`). Each claim's `caveats` are its
    own; those that hold for the whole run are `run_caveats`'s, to be said once beside the claims."""
    chosen, platform = _select(list(results), platform)
    index = summarise(chosen)
    measured = {cid: rule(index) for cid, rule in RULES.items()}
    _, own = _caveats(index, {cid: (_used(parts), parts) for cid, parts in measured.items()}, platform, profile)
    claims = []
    for cid, parts in measured.items():
        verdict, reason = _verdict(parts)
        cells = _used(parts)
        title, paper = TITLES[cid]
        claims.append(Claim(cid, title, paper, verdict, reason,
                            evidence=[p.detail for p in parts if p.outcome != NOT_MEASURED],
                            cells=cells, caveats=own[cid], parts=parts))
    return claims


def run_caveats(results: Iterable[dict[str, Any]], *, platform: str | None = None, profile: str | None = None,
                claims: list[Claim] | None = None) -> list[str]:
    """The caveats that hold for every claim of one platform's results, to be stated once beside them (the claims'
    own are in `Claim.caveats`): the platform against the paper's, the profile, one repeat per cell where that holds
    for every claim that used a cell, how the intervals are made where there are any, the framework versions
    against the paper's. `claims`: `evaluate`'s for the same results, where already at hand (else evaluated)."""
    chosen, platform = _select(list(results), platform)
    index = summarise(chosen)
    measured = ({c.id: c.parts for c in claims} if claims is not None
                else {cid: rule(index) for cid, rule in RULES.items()})
    run, _ = _caveats(index, {cid: (_used(parts), parts) for cid, parts in measured.items()}, platform, profile)
    return run


def evaluate_by_platform(results: Iterable[dict[str, Any]], *, profile: str | None = None) -> dict[str, list[Claim]]:
    results = list(results)
    return {p: evaluate(results, platform=p, profile=profile) for p in platforms(results) or [None]}


def time_to_target_table(results: Iterable[dict[str, Any]], *, platform: str | None = None) -> list[dict[str, Any]]:
    """Per model: time to target of PyTorch eager and MindSpore GRAPH (AMP off, 1 device), the measured
    PyTorch/MindSpore time ratio (None unless both reached the target) and the paper's (PAPER_TTT_RATIO); where both
    cells have 2 repeats or more, `ratio_interval` (harness.results.measure.ratio_interval; absent otherwise)."""
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
            row[f"{fw}_s"] = s.time_to_target.median if s else None
            row[f"{fw}_best_metric"] = s.value("best_metric") if s else None
            if s:
                row["metric"], row["target"] = s.first.get("metric"), s.first.get("target")
                if row[f"{fw}_s"] is None:
                    row["notes"].append(f"{FW_NAMES[fw]} did not reach the target")
            else:
                row["notes"].append(why)
        row["ratio"] = (row["pytorch_s"] / row["mindspore_s"]
                        if row["pytorch_s"] is not None and row["mindspore_s"] is not None else None)
        pt, ms = (index.get(row[f"{fw}_cell"]) for fw in ("pytorch", "mindspore"))
        interval = ratio_interval(pt.time_to_target, ms.time_to_target) if row["ratio"] is not None else None
        if interval is not None:
            row["ratio_interval"] = interval
        if any(index.get(row[f"{fw}_cell"]) for fw in ("pytorch", "mindspore")) or model in PAPER_TTT_RATIO:
            rows.append(row)
    return rows
