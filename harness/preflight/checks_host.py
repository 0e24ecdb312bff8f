"""Host rows every platform shares besides disk: the host's memory against what the committed CPU run's cells used,
and the datasets already in the data folder (the rest are downloaded and verified on the first run). Standard library
only (the check runs before any .venv): the dataset folders are read from harness/data/*.py as text.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from harness.preflight import NOTE, PASS, Row
from harness.preflight.host import REPO

EXPECTED = REPO / "docs" / "runs" / "cpu-quick"


def _mem_total_gib(meminfo: str = "/proc/meminfo") -> float | None:
    try:
        text = Path(meminfo).read_text()
    except OSError:
        return None
    m = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) / 2**20 if m else None


def _largest_rss(run: Path = EXPECTED) -> tuple[float, str] | None:
    """The largest peak RSS (GiB) a cell of the committed run recorded, and that cell."""
    best = None
    for path in run.glob("cells/**/r*.json"):
        if not path.name[1:-5].isdigit():
            continue
        try:
            r = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        mb = r.get("peak_rss_mb")
        if isinstance(mb, (int, float)) and (best is None or mb / 1024 > best[0]):
            best = (mb / 1024, r.get("cell", "?"))
    return best


def memory_row(meminfo: str = "/proc/meminfo", run: Path = EXPECTED) -> Row:
    total, largest = _mem_total_gib(meminfo), _largest_rss(run)
    check = "host memory"
    if total is None or largest is None:
        return Row(check, "not read", "room for two cells' processes at once", NOTE,
                   note="the host's memory or the committed run's peaks could not be read")
    need = 2 * largest[0]   # a scaling cell's two processes, or an operator turn group's, at once
    needed = (f">= {need:.1f} GiB: two processes of the largest cell of docs/runs/cpu-quick at once ({largest[1]}: "
              f"{largest[0]:.1f} GiB peak RSS)")
    found = f"{total:.1f} GiB"
    if total >= need:
        return Row(check, found, needed, PASS)
    return Row(check, found, needed, NOTE, note=f"this host has {total:.1f} GiB; cells may be slowed by swapping or "
                                                f"killed for memory (their reason says so); close other programs")


def dataset_folders(data_pkg: Path = REPO / "harness" / "data") -> dict[str, str]:
    """{dataset: its folder under the data directory}, from each harness/data/<dataset>.py's FOLDER line."""
    out = {}
    for path in sorted(data_pkg.glob("*.py")):
        m = re.search(r'^FOLDER\s*=\s*"([^"]+)"', path.read_text(), re.M)
        if m:
            out[path.stem] = m.group(1)
    return out


def data_row(env: dict[str, str] | None = None) -> Row:
    env = dict(os.environ if env is None else env)
    where = Path(env.get("HARNESS_DATA_DIR") or REPO / "data")
    folders = dataset_folders()
    here = [d for d, f in folders.items() if (where / f).is_dir() and any((where / f).iterdir())]
    missing = [d for d in folders if d not in here]
    found = (f"{', '.join(here) or 'none'} in {where}" + (f"; not yet: {', '.join(missing)}" if missing else ""))
    needed = "the datasets the run reads (--data-dir, default ./data or $HARNESS_DATA_DIR)"
    if not missing:
        return Row("datasets", found, needed, PASS)
    return Row("datasets", found, needed, NOTE,
               note=f"{', '.join(missing)}: downloaded and checked against their pinned sha256 on the first run "
                    f"(about 0.4 GB in all; harness/data/); offline, copy them there or use --synthetic")
