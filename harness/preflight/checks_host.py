"""Host rows every platform shares besides disk: the host's memory against what the expected CPU run's cells used,
and the datasets already in the data folder (the rest are downloaded and verified on the first run). Facts from the
`Host` (host.py reads /proc/meminfo, the expected run's cells and the data folder); no I/O here. A host recorded
before these facts were gathered has neither row.
"""

from __future__ import annotations

from harness.preflight import NOTE, PASS, Row
from harness.preflight.host import Host


def memory_row(host: Host) -> Row:
    total = host.facts.get("memory_gib")
    run = host.facts.get("expected_run") or {}
    largest = run.get("largest_rss")
    check = "host memory"
    if total is None or largest is None:
        return Row(check, "not read", "room for two cells' processes at once", NOTE,
                   note="the host's memory or the committed run's peaks could not be read")
    need = 2 * largest["gib"]   # a scaling cell's two processes, or an operator turn group's, at once
    needed = (f">= {need:.1f} GiB: two processes of the largest cell of docs/runs/{run.get('name')} at once "
              f"({largest['cell']}: {largest['gib']:.1f} GiB peak RSS)")
    found = f"{total:.1f} GiB"
    if total >= need:
        return Row(check, found, needed, PASS)
    return Row(check, found, needed, NOTE, note=f"this host has {total:.1f} GiB; cells may be slowed by swapping or "
                                                f"killed for memory (their reason says so); close other programs")


def data_row(host: Host) -> Row:
    d = host.facts.get("datasets") or {}
    where, folders, here = d.get("dir", "?"), d.get("folders") or {}, d.get("present") or []
    missing = [name for name in folders if name not in here]
    found = (f"{', '.join(here) or 'none'} in {where}" + (f"; not yet: {', '.join(missing)}" if missing else ""))
    needed = "the datasets the run reads (--data-dir, default ./data or $HARNESS_DATA_DIR)"
    if not missing:
        return Row("datasets", found, needed, PASS)
    return Row("datasets", found, needed, NOTE,
               note=f"{', '.join(missing)}: downloaded and checked against their pinned sha256 on the first run "
                    f"(about 0.4 GB in all; harness/data/); offline, copy them there or use --synthetic")


def rows(host: Host) -> list[Row]:
    """The memory and dataset rows, where the host's facts have them."""
    f = host.facts
    return ([memory_row(host)] if "memory_gib" in f else []) + ([data_row(host)] if "datasets" in f else [])
