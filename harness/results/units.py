"""How the harness writes a quantity for a person to read, in one place: the docs, `harness estimate`, the runner's
estimate and its progress lines all write a time the same way.

    duration(seconds)   "42 s", "12 min 34 s", "1 h 01 min 13 s"
    brief(text, width)  a reason's first line in at most `width` characters, cut between words: "... GCN's AMP ..."
"""

from __future__ import annotations


def duration(seconds: float) -> str:
    """Whole seconds, with minutes and hours where it has them: "42 s", "12 min 34 s", "1 h 01 min 13 s"."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s" if m else f"{s} s"


def brief(text: object, width: int) -> str:
    """The first line of `text` in at most `width` characters: whole where it fits, else cut between two words (inside
    a word only where one word is longer than that) and ended with "...", so that a reason in a progress line or a
    table cell never stops mid-word."""
    lines = str(text).strip().splitlines()
    line = lines[0].strip() if lines else ""
    if len(line) <= width:
        return line
    cut = line[:width - 3].rsplit(" ", 1)[0]   # a room without a space (one long word) stays whole
    return cut.rstrip(" ,;:(") + "..."
