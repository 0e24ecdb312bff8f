"""The preflight's output: one table (check, found, needed, verdict) with long cells wrapped, the notes and the
sources the rows cite under it (stdout), and one line per failure saying what to do (stderr), the line that
says there is no device last."""

from __future__ import annotations

import textwrap
from typing import Any

from harness.preflight import FAIL, NEXT, Row

WIDTHS = (30, 52, 52, 11)  # check, found, needed, verdict
HEADER = ("check", "found", "needed", "verdict")


def table(rows: list[Row]) -> str:
    lines = []
    cells = [HEADER] + [(r.check, r.found, r.needed, r.verdict) for r in rows]
    widths = [min(w, max(len(c[i]) for c in cells)) for i, w in enumerate(WIDTHS)]
    for n, cell in enumerate(cells):
        wrapped = [textwrap.wrap(cell[i], widths[i], break_long_words=True) or [""] for i in range(len(widths))]
        for k in range(max(len(w) for w in wrapped)):
            parts = [(w[k] if k < len(w) else "").ljust(widths[i]) for i, w in enumerate(wrapped)]
            lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def notes(rows: list[Row], sources: dict[str, Any]) -> str:
    out = [f"note: {r.check}: {r.note}" for r in rows if r.note and r.ok()]
    cited: list[str] = []
    for r in rows:
        cited += [c for c in r.cite if c not in cited and c in sources]
    if cited:
        out.append("sources:")
        out += [f"  [{c}] {sources[c]['title']}, {sources[c]['url']}" for c in cited]
    return "\n".join(out)


def failures(rows: list[Row], prog: str) -> list[str]:
    bad = [r for r in rows if r.verdict == FAIL]
    bad.sort(key=lambda r: r.last)
    return [f"{prog}: {r.fix or r.check + ': ' + r.found}" for r in bad]


def next_step(rows: list[Row], command: str, profile: str) -> str:
    """The line after the table when nothing failed: build next (what `--build` makes is not there yet), or run."""
    if any(r.verdict == FAIL for r in rows):
        return ""
    if any(r.verdict == NEXT for r in rows):
        return (f"ready to build: next, {command} --build (it builds and stops), then {command} --check again to "
                f"run the training steps")
    return f"ready: next, {command} (the {profile} profile; --dry-run prints what it runs)"
