"""The report's layout, decided in Python for the templates to render: its sections in page order (the table of
contents lists what the page holds, in the order it holds it) and the runs a rule skipped, said once per rule.

    planned_skips(skipped results) -> [{host, reason, runs, cells}]
    sections(data) -> [{id, title}] of harness.report.build.collect's data, in page order
"""

from __future__ import annotations

from typing import Any


def planned_skips(skipped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs a rule skipped before they ran (a profile's rule for the platform, a framework not installed, a
    device too small: harness.host.plan.Host.verdict), one entry per host and reason: the reason once, how many runs it
    covers and their cells. A skip is the plan carried out, not a fault: the report says it apart from the runs
    that failed or timed out."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in skipped:
        groups.setdefault((r["host"], r.get("reason") or "no reason recorded"), []).append(r)
    return [{"host": host, "reason": reason, "runs": len(rs), "cells": sorted({r["cell"] for r in rs})}
            for (host, reason), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1]))]


def _memory(d: dict[str, Any]) -> bool:
    return bool(d["device_memory"].get("rows") or d["device_memory"].get("cpu"))


# (anchor, title in the table of contents, whether the run has it), in page order: the verdicts first, then what
# they rest on. templates/report.html.j2 holds its sections in this order; tests/test_report.py holds the page's
# headings and the table of contents to each other.
SECTIONS = (
    ("claims", "Claims and verdicts", lambda d: True),
    ("environment", "Environment", lambda d: True),
    ("why", "Why: where a step's time goes", lambda d: bool(d["why"])),
    ("table1", "Table I: throughput", lambda d: True),
    ("device-memory", "Device memory", _memory),
    ("ttt", "Time to target", lambda d: True),
    ("fig3", "Figure 3: metric over time", lambda d: True),
    ("fig4", "Figure 4: scaling", lambda d: True),
    ("fig5", "Figure 5: operators", lambda d: True),
    ("energy", "Energy per sample", lambda d: True),
    ("at-best", "Each framework at its best", lambda d: bool(d["at_best"])),
    ("companion", "Companion studies", lambda d: True),
    ("settings", "Settings applied", lambda d: True),
    ("problems", "Cells that did not finish", lambda d: bool(d["problems"])),
)


def sections(data: dict[str, Any]) -> list[dict[str, str]]:
    return [{"id": anchor, "title": title} for anchor, title, present in SECTIONS if present(data)]
