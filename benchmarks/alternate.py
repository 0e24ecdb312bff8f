"""Paired measurements for the overhead benchmarks: the two sides take turns, the order swapping every round, so
that a drift in the machine's state (other load, thermal, a slow phase of the host) does not favour one side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def alternate(first: Callable[[], Any], second: Callable[[], Any], rounds: int) -> list[tuple[Any, Any]]:
    """[(first(), second()), ...] for `rounds` rounds; odd rounds run second() before first()."""
    out = []
    for i in range(rounds):
        if i % 2:
            b = second()
            a = first()
        else:
            a = first()
            b = second()
        out.append((a, b))
    return out
