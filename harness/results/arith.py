"""The comparison arithmetic, in one place for the runner, the claims and the report: ratios of two measurements,
per-device throughput, scaling efficiency, which side of 1 a ratio lies on (with a tie margin), and the rank
correlation of two series (scipy)."""

from __future__ import annotations

import math


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None where either is missing or b is 0."""
    if a is None or not b:
        return None
    return a / b


def per_device(global_throughput: float | None, devices: int) -> float | None:
    return ratio(global_throughput, devices)


def efficiency(per_device_throughput: float | None, single_device_throughput: float | None) -> float | None:
    """Scaling efficiency: per-device throughput at n devices over the throughput on one (1.0 = linear)."""
    if not per_device_throughput:
        return None
    return ratio(per_device_throughput, single_device_throughput)


def side(r: float, tie: float) -> str:
    """'above' / 'below' / 'tie' for a ratio of two positive numbers; within a factor `tie` of 1 is a tie."""
    if r > tie:
        return "above"
    if r < 1 / tie:
        return "below"
    return "tie"


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (scipy.stats.spearmanr); None for fewer than 3 points or a constant series."""
    if len(xs) < 3 or len(set(xs)) == 1 or len(set(ys)) == 1:
        return None
    from scipy.stats import spearmanr

    rho = spearmanr(xs, ys).statistic
    return None if rho is None or math.isnan(rho) else float(rho)
