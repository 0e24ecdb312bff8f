"""The claims about single operators (O1-O3): MindSpore/PyTorch throughput per operator configuration, grouped
by operator, dtype and direction, and compared across parameter counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import Any

import numpy as np

from harness.claims.common import (
    CONTRADICTS,
    SUPPORTS,
    Interval,
    Part,
    Repeats,
    _compare,
    _missing,
    _parsed,
    _side,
    interval_side,
)
from harness.claims.paper import INCONCLUSIVE, MIN_PARAM_LEVELS, OP_MS_MODES, OP_PT_MODE, TERCILE, TIE_RATIO
from harness.results import arith
from harness.results.measure import LEVEL, OpConfig, interval_text, operator_ratios, replicate_interval


@dataclass(frozen=True)
class OpRatio:
    """One operator configuration (harness.results.measure.OpConfig: op, dtype, direction, shape) at the MindSpore mode
    its group is compared in."""

    config: OpConfig
    ms_mode: str

    def __getattr__(self, name: str) -> Any:
        return getattr(self.config, name)

    @property
    def params(self) -> int:
        return int(self.config.params or 0)

    @property
    def ratio(self) -> float:
        return self.config.ratio(self.ms_mode)

    @property
    def cells(self) -> list[str]:
        return self.config.cell_ids(self.ms_mode)

    @property
    def replicates(self) -> np.ndarray | None:
        return self.config.ratio_replicates(self.ms_mode)

    @property
    def groups(self) -> int | None:
        """How many turn groups the ratio is taken over (those left out not counted); None where the cells were not
        timed by turns."""
        return len(self.config.turn_pairs(self.ms_mode)) or None


def _interval(groups: list[list[OpRatio]], stat: Callable[..., np.ndarray]) -> Interval | None:
    """The interval of a statistic of groups of configurations' ratios (a median over a group, or a quotient of two
    groups' medians): the statistic taken over each replicate, draw by draw
    (harness.results.measure.OpConfig.ratio_replicates:
    Student's t over the turn groups, or each cell's processes and blocks resampled), so that every configuration's
    spread reaches the verdict. None where a configuration kept no block times (results from before block times were
    kept)."""
    reps = [[o.replicates for o in g] for g in groups]
    if any(r is None for g in reps for r in g):
        return None
    return replicate_interval(stat(*(np.median(np.stack(g), axis=0) for g in reps)))


def _interval_side(interval: Interval | None, point: float) -> str:
    """'above' / 'below' / 'tie' for a ratio, decided by its interval's two ends where it has one (both ends within
    the tie band: a tie; the ends on different sides: INCONCLUSIVE), else by the point value."""
    return _side(point) if interval is None else interval_side(interval)


def paired_ratios(index: dict[str, Repeats]) -> list[OpRatio]:
    """The configurations of harness.results.measure.operator_ratios measured in both frameworks; per (op, dtype,
    direction) the MindSpore mode is the first of OP_MS_MODES with any configuration measured in both."""
    configs = operator_ratios(index)
    mode: dict[tuple, str] = {}
    for key in {(c.op, c.dtype, c.direction) for c in configs}:
        group = [c for c in configs if (c.op, c.dtype, c.direction) == key]
        found = [m for m in OP_MS_MODES if any(c.ratio(m) is not None for c in group)]
        if found:
            mode[key] = found[0]
    return [OpRatio(c, mode[key]) for c in configs
            if (key := (c.op, c.dtype, c.direction)) in mode and c.ratio(mode[key]) is not None]


def _op_missing(index: dict[str, Repeats], op: str | None) -> str:
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


def _o1(index: dict[str, Repeats]) -> list[Part]:
    ratios = paired_ratios(index)
    if not ratios:
        return [_missing("operators", _op_missing(index, None))]
    parts = []
    seen = {c.op for c in (_parsed(s.cell) for s in index.values()) if c is not None and c.kind == "operator"}
    for op in sorted(seen - {o.op for o in ratios}):
        parts.append(_missing(op, _op_missing(index, op)))
    missing, groups = _sized_groups(ratios, "only {n} distinct parameter count: no trend to see")
    parts += missing
    for name, rs, levels in groups:
        k = max(1, len(levels) // TERCILE)
        low = [o for o in rs if o.params in levels[:k]]
        high = [o for o in rs if o.params in levels[-k:]]
        lo, hi = median(o.ratio for o in low), median(o.ratio for o in high)
        rho = arith.spearman([o.params for o in rs], [o.ratio for o in rs])
        interval = _interval([high, low], lambda h, lw: h / lw)
        parts.append(_compare(name, [c for o in rs for c in o.cells], hi / lo, "above",
                              f"{name}, {_mode_note(rs)}: median ratio {lo:.2f} at the fewest "
                              f"parameters [{_describe(low)}], {hi:.2f} at the most [{_describe(high)}]; "
                              f"most/fewest {hi / lo:.2f}"
                              + (f"; Spearman rho(params, ratio) {rho:+.2f} over {len(rs)} configurations"
                                 if rho is not None else ""), interval))
    return parts


def _o2(index: dict[str, Repeats]) -> list[Part]:
    ratios = [o for o in paired_ratios(index) if o.op == "batchnorm2d"]
    if not ratios:
        return [_missing("batchnorm2d", _op_missing(index, "batchnorm2d"))]
    parts, groups = _sized_groups(ratios, "only {n} BatchNorm size: cannot tell small from large")
    for name, rs, levels in groups:
        dtype, direction = rs[0].dtype, rs[0].direction
        small = [o for o in rs if o.params in levels[:max(1, len(levels) // 2)]]
        m = median(o.ratio for o in small)
        parts.append(_compare(name, [c for o in small for c in o.cells], m, "above",
                              f"BatchNorm2d {dtype} {direction}, {_mode_note(rs)}: median ratio {m:.2f} over the "
                              f"smaller half of the sizes [{_describe(small)}]", _interval([small], lambda x: x)))
    return parts


def _o3(index: dict[str, Repeats]) -> list[Part]:
    ratios = [o for o in paired_ratios(index) if o.op == "conv2d"]
    if not ratios:
        return [_missing("conv2d", _op_missing(index, "conv2d"))]
    parts, groups = _sized_groups(ratios, "only {n} Conv2d size: cannot tell large from small")
    for name, rs, levels in groups:
        dtype, direction = rs[0].dtype, rs[0].direction
        k = max(1, len(levels) // TERCILE)
        large = [o for o in rs if o.params in levels[-k:]]
        rest = [o for o in rs if o.params not in levels[-k:]]
        ml, mr = median(o.ratio for o in large), median(o.ratio for o in rest)
        il, ir = _interval([large], lambda x: x), _interval([rest], lambda x: x)
        side_large, side_rest = _interval_side(il, ml), _interval_side(ir, mr)
        ahead_large, ahead_rest = side_large == "above", side_rest == "above"
        unsure = INCONCLUSIVE in (side_large, side_rest)
        verdict = INCONCLUSIVE if unsure else SUPPORTS if ahead_large and not ahead_rest else CONTRADICTS
        fails = [w for w, bad in (("MindSpore not ahead even at the largest", not ahead_large),
                                  ("MindSpore ahead at smaller sizes too", ahead_rest)) if bad and not unsure]
        ends = "".join(f"; {what} {LEVEL:.0%} interval {interval_text(iv)}" for what, iv in
                       (("largest", il), ("others", ir)) if iv)
        parts.append(Part(name, verdict,
                          f"Conv2d {dtype} {direction}, {_mode_note(rs)}: median ratio {ml:.2f} at the largest "
                          f"[{_describe(large)}] vs {mr:.2f} at the others [{_describe(rest)}]{ends}"
                          + (f" ({'; '.join(fails)})" if fails else "")
                          + (f" (an interval across the ±{TIE_RATIO - 1:.0%} tie band)" if unsure else "")
                          + f" — {verdict}",
                          [c for o in rs for c in o.cells], il))
    return parts


RULES = {"O1": _o1, "O2": _o2, "O3": _o3}
