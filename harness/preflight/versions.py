"""Version strings as the vendors number them, compared without guessing.

NVIDIA drivers: `535.183.01`, `470.182.03`, `560.35.03`: dot-separated integers, compared as tuples.
Ascend HDK: `25.2.0`, `24.1.rc2`, `24.1.rc2.2`, `25.0.rc1.1`, `23.0.5`: a release candidate `rcN` comes before
the release of the same number (24.1.rc2 < 24.1.0). A minimum given with fewer parts (`25.2`) is met by every
version that starts with at least that much (25.2.rc1, 25.2.0, 25.3.0, 26.0.rc1), so "HDK 25.2 or newer" reads
as the vendor writes it.
"""

from __future__ import annotations

import re

_PART = re.compile(r"^(?:(\d+)|rc(\d+)|RC(\d+))$")


def key(version: str) -> tuple[tuple[int, int], ...]:
    """A sortable key: each numeric part is (1, n); `rcN` is (0, N) at the place of the number it precedes.
    Unparsable parts (build tags like `b070`) end the key."""
    out = []
    for part in version.strip().split("."):
        m = _PART.match(part)
        if not m:
            break
        if m.group(1) is not None:
            out.append((1, int(m.group(1))))
        else:
            out.append((0, int(m.group(2) or m.group(3))))
    return tuple(out)


def at_least(found: str, minimum: str) -> bool | None:
    """Whether `found` meets `minimum`, compared over the minimum's number of parts; None if either cannot be
    read. An rc at a place the minimum does not reach counts as that release (25.2.rc1 meets 25.2)."""
    f, m = key(found), key(minimum)
    if not f or not m:
        return None
    f = f[:len(m)] + ((1, 0),) * max(0, len(m) - len(f))
    return f >= m


def branch(driver: str) -> int | None:
    """The NVIDIA driver branch: 535 for 535.183.01."""
    k = key(driver)
    return k[0][1] if k and k[0][0] == 1 else None


def cc_tuple(cc: str) -> tuple[int, int] | None:
    """Compute capability "7.0" -> (7, 0)."""
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", cc or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def in_range(found: str, low: str, high: str) -> bool | None:
    """Whether `low <= found <= high` (all parts compared), None if unreadable."""
    f, lo, hi = key(found), key(low), key(high)
    if not f or not lo or not hi:
        return None
    return lo <= f[:len(lo)] and f[:len(hi)] <= hi
