"""The one measurement type: the repeats of a cell with their raw samples kept, and every statistic over them
derived here, for the claims, the report, its companion section and its figures alike.

    Sample              one quantity over a cell's ok repeats: `samples` as measured (None where a repeat gave
                        none); median, min, max, n, spread() (the report's view), interval() (the median's)
    Repeats             the repeats of one cell: `ok`, `not_ok`, `first`, `measure(key)` -> Sample,
                        `value(key)` (its median), `time_to_target` -> Sample, `curve()`, `why_not()`
    ratio_interval(a, b) -> (lo, hi) | None: the interval of the ratio of two Samples' medians, a percentile
                        bootstrap over each side's repeats (the claims, Table I, the time-to-target table, Figures
                        3 and 4)
    quotient_interval(num, den) the same bootstrap for a product of medians over another (C5's ratio of two
                        scaling efficiencies; with den empty, one median's interval: C2's first-epoch fraction)
    summarise(results) -> {cell id: Repeats} block_replicates(cell) bootstrap replicates of a block-timed cell's
    throughput, its processes and, within each,
                        its blocks resampled; replicate_interval(replicates) -> (lo, hi)
    operator_ratios(index) -> [OpConfig]: per operator configuration the throughput of each framework/mode and
                        MindSpore/PyTorch per MindSpore mode with its interval and replicates (Figure 5, the
                        operator table, O1-O3); timed by turns, over the groups the run's noise keeps
                        (harness.results.hostnoise)

A repeat that never reached its target counts as infinitely slow (the one rule, everywhere): a cell's time to
target is the median over its ok repeats with those at +inf, and where that median is infinite (half of the
repeats or more never reached the target) the cell did not reach it (None). Dropping those repeats instead would
report a cell that reached its target once in three repeats at that one time, as if it reliably did. Inside
ratio_interval's resamples the same holds: a resample's median can be +inf, its ratio then +inf (or 0 where the
denominator's is), and a resample whose two medians are both +inf has no ratio: it counts as 0 for the lower end and
+inf for the upper, widening the interval, never narrowing it.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

from harness.results import arith, hostnoise
from harness.results.units import brief

LEVEL = 0.95   # the median's interval, and a ratio's: its coverage
RESAMPLES = 4000   # ratio_interval's bootstrap resamples per side
SEED = 20221122    # ratio_interval's generator: the same repeats always give the same interval
# An operator process's time: the 10th percentile of its block times, the host's fast phase, not the median. On the
# 2-core virtual machine this was measured on, a vCPU runs at two speeds about 1.7x apart, in phases from
# milliseconds to seconds that come from outside the VM (a spinning sibling vCPU did not change them); the median of
# a process's blocks then lands in either phase. Two quick sweeps' GRAPH/eager ratios moved by 5.0% between the
# sweeps (median over the configurations) with the median, by 1.7% with this statistic (docs/methodology/
# operators.md, item 12).
FAST_QUANTILE = 0.1


def fast_time(times: Any, axis: int = -1) -> Any:
    """The FAST_QUANTILE of block times (per-iteration seconds) along `axis`: an operator process's time."""
    return np.quantile(np.asarray(times, dtype=float), FAST_QUANTILE, axis=axis)


def _number(v: Any) -> bool:
    return isinstance(v, int | float)


@dataclass(frozen=True)
class Sample:
    """One quantity over the ok repeats of a cell. `slowest_if_missing`: a missing value counts as +inf (a time to
    target that was never reached), else it is left out. Statistics that come out infinite read None."""

    samples: tuple[Any, ...] = ()
    slowest_if_missing: bool = False

    @property
    def values(self) -> tuple[float, ...]:
        if self.slowest_if_missing:
            return tuple(v if _number(v) else math.inf for v in self.samples)
        return tuple(v for v in self.samples if _number(v))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float | None:
        return _finite(median(self.values)) if self.values else None

    @property
    def min(self) -> float | None:
        return _finite(min(self.values)) if self.values else None

    @property
    def max(self) -> float | None:
        return _finite(max(self.values)) if self.values else None

    def interval(self, level: float = LEVEL) -> tuple[float, float | None] | None:
        """The distribution-free interval of the median (order statistics, binomial coverage): the narrowest
        [x_(j), x_(n+1-j)] that covers the median with probability >= level; None where the repeats are too few
        (n < 6 at 95%). Its upper end is None where it is a repeat that never reached the target."""
        xs, n = sorted(self.values), self.n
        j = 0
        while j + 1 <= n / 2 and 1 - 2 * sum(math.comb(n, i) for i in range(j + 1)) / 2 ** n >= level:
            j += 1
        if j == 0:
            return None
        lo = _finite(xs[j - 1])
        return None if lo is None else (lo, _finite(xs[n - j]))

    def spread(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n, "interval": self.interval()}


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else x


def ratio_interval(a: Sample, b: Sample, level: float = LEVEL) -> tuple[float, float | None] | None:
    """The `level` interval of median(a) / median(b): a percentile bootstrap, each side's repeats resampled with
    replacement on their own (the two cells are independent processes), RESAMPLES times from a generator seeded with
    SEED, so the same repeats always give the same interval. The ends are the lower and upper (level) percentiles of
    the resampled ratios, taken as order statistics (no interpolation: an end is a ratio some resample gave).
    None unless both sides have 2 repeats or more: one repeat has no spread to resample. A repeat that never reached
    its target counts as +inf (Sample.slowest_if_missing), as everywhere; see the module's docstring for what that
    does inside a resample. The upper end is None where it is +inf."""
    return quotient_interval((a,), (b,), level)


def quotient_interval(num: Sequence[Sample], den: Sequence[Sample] = (),
                      level: float = LEVEL) -> tuple[float, float | None] | None:
    """ratio_interval's bootstrap for a quotient of several medians: the product of the medians of `num` over that of
    `den`, every Sample resampled on its own, in order (num, then den) from the one seeded generator. C5's ratio of
    two scaling efficiencies is one: (per-device MindSpore x 1-device PyTorch) / (1-device MindSpore x per-device
    PyTorch); with `den` empty it is the interval of one median (C2's first-epoch fraction against its threshold).
    None unless every Sample has 2 repeats or more."""
    values = [np.asarray(s.values, dtype=float) for s in (*num, *den)]
    if not num or any(len(v) < 2 for v in values):
        return None
    rng = np.random.default_rng(SEED)
    medians = [np.median(v[rng.integers(0, len(v), (RESAMPLES, len(v)))], axis=1) for v in values]
    top, bottom = np.ones(RESAMPLES), np.ones(RESAMPLES)
    with np.errstate(divide="ignore", invalid="ignore"):
        for m in medians[:len(num)]:
            top = top * m
        for m in medians[len(num):]:
            bottom = bottom * m
        r = top / bottom   # inf / finite = inf, finite / inf = 0, inf / inf = nan (no ratio), x / 0 = inf
    lo = replicate_interval(np.where(np.isnan(r), 0.0, r), level)[0]
    hi = replicate_interval(np.where(np.isnan(r), np.inf, r), level)[1]
    return lo, _finite(hi)


class Repeats:
    """The repeats of one cell: statistics over the ok ones, the status and reason of the others."""

    def __init__(self, cell: str):
        self.cell = cell
        self.ok: list[dict[str, Any]] = []
        self.not_ok: list[dict[str, Any]] = []
        self._samples: dict[Any, Sample] = {}

    def add(self, result: dict[str, Any]) -> None:
        (self.ok if result.get("status") == "ok" else self.not_ok).append(result)
        self._samples.clear()

    @property
    def first(self) -> dict[str, Any]:
        return (self.ok or self.not_ok)[0]

    @property
    def repeats(self) -> int:
        return len(self.ok) + len(self.not_ok)

    def measure(self, key: str | Callable[[dict[str, Any]], Any]) -> Sample:
        """A result field (or a function of one ok repeat) over the ok repeats."""
        if key not in self._samples:
            get = key if callable(key) else (lambda r: r.get(key))
            self._samples[key] = Sample(tuple(get(r) for r in self.ok))
        return self._samples[key]

    def value(self, key: str) -> float | None:
        """The median of a result field over the ok repeats (None where none gave a number)."""
        return self.measure(key).median

    @property
    def time_to_target(self) -> Sample:
        """Time to target over the ok repeats, one that never reached the target counting as infinitely slow."""
        return Sample(tuple(r.get("time_to_target_s") for r in self.ok), slowest_if_missing=True)

    def curve(self) -> Any:
        """Figure 3's curve: that of the median repeat by time to target (never reached: slower than any that did,
        those ordered by wall time)."""
        def key(r):
            t = r.get("time_to_target_s")
            return (0, t) if _number(t) else (1, r.get("wall_s") or 0.0)
        by_time = sorted(self.ok, key=key)
        return by_time[len(by_time) // 2].get("curve") if by_time else None

    def why_not(self) -> str:
        r = self.not_ok[0] if self.not_ok else {}
        reason = brief(r.get("reason") or "", 160)
        why = f": {reason}" if reason else ""
        return f"{self.cell} {r.get('status', 'not ok')}{why}"


def relative_half_width(interval: tuple[float, float | None], point: float) -> float:
    """An interval's half-width as a share of its point value (Figure 5's precision: harness.launch.sequential)."""
    lo, hi = interval
    return math.inf if hi is None or not point else (hi - lo) / 2 / point


def interval_text(interval: tuple[float, float | None] | None, digits: int = 2) -> str:
    """A ratio_interval as 'lo–hi' (an infinite upper end: ∞), the one wording of the claims, report and figures;
    '' for none."""
    if not interval:
        return ""
    lo, hi = interval
    return f"{lo:.{digits}f}–{'∞' if hi is None else f'{hi:.{digits}f}'}"


def summarise(results: Iterable[dict[str, Any]]) -> dict[str, Repeats]:
    """Results (one per cell and repeat) grouped per cell, in the order their cells first appear."""
    index: dict[str, Repeats] = {}
    for r in results:
        if r.get("cell"):
            index.setdefault(r["cell"], Repeats(r["cell"])).add(r)
    return index


# -- operators ---------------------------------------------------------------------------------------------------
PT_MODE = "eager"


def block_replicates(cell: Repeats) -> np.ndarray | None:
    """RESAMPLES bootstrap replicates of a block-timed cell's throughput (an operator's), resampled at the two levels
    it varies at: its processes (repeats) with replacement, since per-process state differs (pyperf's observation,
    and MindSpore's, measured: docs/methodology/operators.md), and within each chosen process its blocks with
    replacement. A replicate is the median over the chosen processes of each one's throughput at its statistic (the
    fast quantile of its blocks, or their median in results from before it), as the point value
    (`value("throughput")`) is the median over the repeats of theirs. The generator is seeded with SEED
    and the cell's id: the same blocks always give the same replicates, and two cells never share a resampling
    pattern. With one repeat it resamples blocks only, which leaves out the spread between processes. None where no ok
    repeat kept its block times."""
    # Each process's statistic as its result took it: the fast quantile of its block times (fast_s, operator cells
    # since it was introduced), else their median (median_s). Resampled on block times, turned into throughput
    # (the result's throughput scaled by its time over the replicate's).
    kept = [r for r in cell.ok if r.get("block_times_s") and _number(r.get("throughput"))
            and _number(r.get("fast_s", r.get("median_s")))]
    if not kept:
        return None

    def throughput_at(r: dict[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
        fast = "fast_s" in r
        own = r["throughput"] * r["fast_s" if fast else "median_s"]
        return lambda draw: own / (fast_time(draw, axis=1) if fast else np.median(draw, axis=1))

    return _two_level([np.asarray(r["block_times_s"], dtype=float) for r in kept], [throughput_at(r) for r in kept],
                      cell.cell)


def group_log_ratios(pairs: list[np.ndarray]) -> np.ndarray:
    """Per turn group (a 2 x rounds array: MindSpore's block times, then PyTorch's), the log of the MindSpore/PyTorch
    throughput ratio of its two processes, each at its time (fast_time: the 10th percentile of its blocks, as every
    operator process's): the group's one figure. Its blocks were taken round by round, one after the other, so the
    host's phases fell on both sides alike."""
    return np.array([math.log(float(fast_time(p[1]) / fast_time(p[0]))) for p in pairs])


def paired_ratio(pairs: list[np.ndarray]) -> float:
    """The ratio of cells timed by turns: the geometric mean over groups of each group's throughput ratio."""
    return float(math.exp(group_log_ratios(pairs).mean()))


def paired_replicates(pairs: list[np.ndarray], seed_id: str, floor: float = 0.0) -> np.ndarray:
    """RESAMPLES replicates of paired_ratio whose percentile interval is Student's t interval over the groups: the
    mean of the groups' log ratios plus its standard error times the t distribution's RESAMPLES evenly spaced
    quantiles (k - 1 degrees of freedom), in an order seeded by SEED and `seed_id` (a cell's id), so that the claims
    can combine several configurations' replicates draw by draw. The groups are the units: what moves a ratio from
    run to run is what differs between pairs of processes and the host's phases that outlast a group, and a
    group's figure already carries its own blocks' noise. A bootstrap over two to four groups (the interval before)
    spans little more than their range and missed the next run's ratio in most configurations
    (docs/methodology/operators.md, item 13); t's wide tails at few groups are what the precision rule then narrows
    with more groups. `floor`: the least spread between groups assumed (the run's: the median over its
    configurations of their spreads, harness.results.hostnoise.HostNoise.spread), so that three groups that agree by
    chance do not give an interval narrower than the host's noise allows. One group: its rounds resampled (no spread
    between processes in it)."""
    from scipy import stats  # here: the cells' own processes import this module, and need no scipy

    logs = group_log_ratios(pairs)
    rng = np.random.default_rng([SEED, zlib.crc32(seed_id.encode())])
    if len(logs) < 2:
        rounds = pairs[0].shape[1]
        draw = pairs[0][:, rng.integers(0, rounds, (RESAMPLES, rounds))]   # 2 x RESAMPLES x rounds, rounds kept whole
        return fast_time(draw[1], axis=1) / fast_time(draw[0], axis=1)
    k = len(logs)
    t = stats.t.ppf((np.arange(RESAMPLES) + 0.5) / RESAMPLES, k - 1)
    return np.exp(logs.mean() + max(float(logs.std(ddof=1)), floor) / math.sqrt(k) * rng.permutation(t))


def _two_level(groups: list[np.ndarray], reduce: list[Callable[[np.ndarray], np.ndarray]], seed_id: str) -> np.ndarray:
    """block_replicates' hierarchical percentile bootstrap: within each group its values
    resampled RESAMPLES times and reduced by its `reduce` entry (each row of the draw to one number), then the groups
    resampled and the median over them taken. Seeded by SEED and `seed_id`."""
    rng = np.random.default_rng([SEED, zlib.crc32(seed_id.encode())])
    per = np.stack([stat(v[rng.integers(0, len(v), (RESAMPLES, len(v)))])
                    for v, stat in zip(groups, reduce, strict=True)])
    pick = rng.integers(0, len(groups), (RESAMPLES, len(groups)))
    return np.median(per[pick, np.arange(RESAMPLES)[:, None]], axis=1)


def replicate_interval(replicates: np.ndarray | None, level: float = LEVEL) -> tuple[float, float] | None:
    """The `level` percentile interval of bootstrap replicates, its ends replicates (order statistics, no
    interpolation; quotient_interval's ends too); None for none."""
    if replicates is None or not len(replicates):
        return None
    tail = (1 - level) / 2 * 100
    return (float(np.percentile(replicates, tail, method="lower")),
            float(np.percentile(replicates, 100 - tail, method="higher")))


@dataclass
class OpConfig:
    """One operator configuration (op, dtype, direction, shape) and its cells per "framework/mode"."""

    op: str
    dtype: str | None
    direction: str | None
    shape: dict[str, Any]
    cells: dict[str, Repeats] = field(default_factory=dict)
    host: hostnoise.HostNoise = field(default_factory=hostnoise.HostNoise)   # the run's (operator_ratios sets it)
    # turn_groups per mode, with the two cells it was made of: every ratio, interval and count of the configuration
    # reads them
    _groups: dict[str, tuple[Repeats, Repeats, list[hostnoise.Group]]] = field(default_factory=dict, repr=False,
                                                                               compare=False)

    @property
    def params(self) -> int | None:
        s = self.cells.get(f"pytorch/{PT_MODE}") or next(iter(self.cells.values()))
        return s.first.get("params")

    @property
    def throughput(self) -> dict[str, float]:
        return {k: s.value("throughput") for k, s in self.cells.items()}

    def ratio(self, ms_mode: str) -> float | None:
        """MindSpore (ms_mode) throughput / PyTorch eager's; above 1: MindSpore faster. None unless both measured.
        Where the two cells were timed by turns (harness.scenarios.operator.turns), the geometric mean over their groups
        of each group's ratio (paired_ratio); else the ratio of the two cells' throughputs."""
        kept = self.host.kept(self.turn_groups(ms_mode))
        if kept:   # paired_ratio of their blocks, from the log ratios each group already holds
            return float(math.exp(np.array([g.log_ratio for g in kept]).mean()))
        ms, pt = self.throughput.get(f"mindspore/{ms_mode}"), self.throughput.get(f"pytorch/{PT_MODE}")
        return arith.ratio(ms, pt) if ms else None

    def turn_groups(self, ms_mode: str) -> list[hostnoise.Group]:
        """Every turn group both cells took part in (harness.results.hostnoise.Group): MindSpore's and PyTorch's block
        times round by round (the two blocks of a round taken one after the other), its log ratio and its probe."""
        ms, pt = self.cells.get(f"mindspore/{ms_mode}"), self.cells.get(f"pytorch/{PT_MODE}")
        if not ms or not pt:
            return []
        got = self._groups.get(ms_mode)
        if got is None or got[0] is not ms or got[1] is not pt:   # the cells it was made of, still these
            got = self._groups[ms_mode] = (ms, pt, self._turn_groups(ms, pt))
        return got[2]

    @staticmethod
    def _turn_groups(ms: Repeats, pt: Repeats) -> list[hostnoise.Group]:
        def by_group(s: Repeats) -> dict[str, dict[str, Any]]:
            return {r["turns"]["group"]: r for r in s.ok if r.get("turns") and r.get("block_times_s")}

        a, b = by_group(ms), by_group(pt)
        out = []
        for g in sorted(a.keys() & b.keys()):
            n = min(len(a[g]["block_times_s"]), len(b[g]["block_times_s"]))
            blocks = np.asarray([a[g]["block_times_s"][:n], b[g]["block_times_s"][:n]], dtype=float)
            out.append(hostnoise.Group(blocks, float(group_log_ratios([blocks])[0]), hostnoise.group_probe(a[g], b[g])))
        return out

    def turn_pairs(self, ms_mode: str) -> list[np.ndarray]:
        """The block times (2 x rounds) of the turn groups the ratio is taken over: those the host's noise keeps
        (harness.results.hostnoise.HostNoise.kept: not taken in a contended stretch)."""
        return [g.blocks for g in self.host.kept(self.turn_groups(ms_mode))]

    def left_out(self, ms_mode: str) -> int:
        """How many of the turn groups were left out of the ratio, taken in a contended stretch."""
        return self.host.left_out(self.turn_groups(ms_mode))

    def ratio_replicates(self, ms_mode: str) -> np.ndarray | None:
        """Replicates of ratio(ms_mode). Timed by turns: Student's t over the groups kept, their spread at least the
        run's (paired_replicates, HostNoise.spread). Else each side's block_replicates, one over the other (the two
        cells are independent processes). None unless both sides kept their block times."""
        pairs = self.turn_pairs(ms_mode)
        if pairs:
            return paired_replicates(pairs, self.cells[f"mindspore/{ms_mode}"].cell, self.host.spread.get(ms_mode, 0.0))
        ms, pt = self.cells.get(f"mindspore/{ms_mode}"), self.cells.get(f"pytorch/{PT_MODE}")
        a, b = (block_replicates(ms), block_replicates(pt)) if ms and pt else (None, None)
        return None if a is None or b is None else a / b

    def ratio_interval(self, ms_mode: str) -> tuple[float, float] | None:
        """ratio(ms_mode)'s LEVEL interval: processes and blocks resampled on both sides (block_replicates)."""
        return replicate_interval(self.ratio_replicates(ms_mode))

    def cell_ids(self, ms_mode: str) -> list[str]:
        return [self.cells[f"mindspore/{ms_mode}"].cell, self.cells[f"pytorch/{PT_MODE}"].cell]


def operator_ratios(index: dict[str, Repeats]) -> list[OpConfig]:
    """Every operator configuration with a throughput measured in any framework/mode, ordered by op, dtype,
    direction and parameter count."""
    cfg: dict[tuple, OpConfig] = {}
    for s in index.values():
        r = s.first
        if r.get("kind") != "operator" or s.value("throughput") is None:
            continue
        shape = r.get("shape") or {}
        key = (r["op"], r.get("dtype"), r.get("direction"), tuple(sorted(shape.items())))
        cfg.setdefault(key, OpConfig(r["op"], r.get("dtype"), r.get("direction"), dict(key[3])))
        cfg[key].cells[f"{r['framework']}/{r['mode']}"] = s
    ordered = [cfg[k] for k in sorted(cfg, key=str)]
    # the host's noise over all of them: which groups were taken in a contended stretch, the run's spread
    modes = {k.split("/")[1] for c in ordered for k in c.cells if k.startswith("mindspore/")}
    host = hostnoise.HostNoise.of({m: [c.turn_groups(m) for c in ordered] for m in sorted(modes)})
    for c in ordered:
        c.host = host
    return sorted(ordered, key=lambda c: (c.op, c.dtype, c.direction, c.params))
