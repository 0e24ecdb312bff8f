"""Where things are, asked here by every module instead of counting the parents of its own file: the checkout,
the harness package, the committed runs and the report's templates. Standard library only (the preflight imports it)."""
from __future__ import annotations

from pathlib import Path

HARNESS = Path(__file__).resolve().parent
REPO = HARNESS.parent
RUNS = REPO / "docs" / "runs"          # the committed runs: the expected results of each platform and profile
TEMPLATES = REPO / "templates"


def expected_run(platform: str | None, profile: str | None) -> Path | None:
    """The committed run a platform's profile is expected to reproduce (docs/runs/<platform>-<profile>), the one
    source of the expected results, the estimate's step times and the configuration they hold for; None if that
    platform and profile has no committed run."""
    folder = RUNS / f"{platform}-{profile}"
    return folder if (folder / "env.json").is_file() else None
