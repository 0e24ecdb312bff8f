#!/usr/bin/env python3
"""Copy what one whole run of the test command wrote about fresh hosts into docs/runs/fresh-host/: the record
(.tox/logs/test-command.json), the pristine hosts' transcripts (.tox/logs/pristine-*.md), the cuda and ascend walks
(.tox/logs/walk-*.md) and the image's walks (.cache/image-check/walk-*.md), with the machine's paths left out: the
checkout's own path dropped, each walk's temporary folder written WALK.

    python3 tools/publish_fresh_host.py CHECKOUT     (CHECKOUT: the clone tools/test.sh ran in)

Then `python -m harness docs --write` renders README's line on the test command from the record.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DEST = Path(__file__).resolve().parent.parent / "docs" / "runs" / "fresh-host"
# a walk's folder (tools/walk.sh: mktemp walk.XXXXXX), under /tmp, /var/tmp or a pristine host's home
WALK = re.compile(r"/[\w./-]*?/walk\.[A-Za-z0-9]{6}")


def scrub(text: str, checkout: Path) -> str:
    return WALK.sub("WALK", text.replace(f"{checkout}/", "").replace(str(checkout), "."))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.exit("usage: python3 tools/publish_fresh_host.py CHECKOUT (the clone tools/test.sh ran in)")
    checkout = Path(argv[0]).resolve()
    record = checkout / ".tox" / "logs" / "test-command.json"
    if not record.is_file():
        sys.exit(f"publish_fresh_host.py: {record} does not exist; run tools/test.sh in {checkout} first")
    found = [record, *sorted((checkout / ".tox" / "logs").glob("pristine-*.md")),
             *sorted((checkout / ".tox" / "logs").glob("walk-*.md")),
             *sorted((checkout / ".cache" / "image-check").glob("walk-*.md"))]
    DEST.mkdir(parents=True, exist_ok=True)
    # the cuda and ascend walks run twice (tox -e main, and after the CUDA image's check): the first of each is kept
    for path in {p.name: p for p in reversed(found)}.values():
        (DEST / path.name).write_text(scrub(path.read_text(), checkout))
        print(f"publish_fresh_host.py: {path.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
