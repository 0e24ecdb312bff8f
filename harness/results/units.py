"""How the harness writes a quantity for a person to read, in one place: the docs, `harness estimate`, the runner's
estimate and its progress lines all write a time the same way.

    duration(seconds)   "42 s", "12 min 34 s", "1 h 01 min 13 s"
"""

from __future__ import annotations


def duration(seconds: float) -> str:
    """Whole seconds, with minutes and hours where it has them: "42 s", "12 min 34 s", "1 h 01 min 13 s"."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s" if m else f"{s} s"
