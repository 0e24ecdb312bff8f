"""Where things are, asked here by every module instead of counting the parents of its own file: the checkout,
the harness package, the committed runs and the report's templates. Standard library only (the preflight imports it)."""
from __future__ import annotations

from pathlib import Path

HARNESS = Path(__file__).resolve().parent
REPO = HARNESS.parent
RUNS = REPO / "docs" / "runs"          # the committed runs: the expected results of each platform and profile
TEMPLATES = REPO / "templates"
