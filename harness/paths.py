"""Where things are, asked here by every module instead of counting the parents of its own file: the checkout,
the harness package, the committed runs and the report's templates. Standard library only (the preflight imports it)."""
from __future__ import annotations

import json
import re
from pathlib import Path

HARNESS = Path(__file__).resolve().parent
REPO = HARNESS.parent
RUNS = REPO / "docs" / "runs"          # the committed runs: the expected results of each platform and profile
TEMPLATES = REPO / "templates"


def cpu_family(model: str | None) -> str:
    """A CPU model as /proc/cpuinfo names it, reduced to its vendor and family ("Intel(R) Xeon(R) Processor @
    2.50GHz" -> "Intel Xeon", "AMD EPYC 7B13 64-Core Processor" -> "AMD EPYC"): the key CPU runs are matched by, since
    each framework's kernels dispatch by the family's instruction sets, not by its clock or core count."""
    words = re.sub(r"\((R|TM|tm|r)\)", " ", model or "").split()
    words = [w for w in words if w.lower() not in ("cpu", "processor")]
    return " ".join(words[:2]) if words else "unknown CPU"


def _env(folder: Path) -> dict:
    try:
        env = json.loads((folder / "env.json").read_text())
    except (OSError, ValueError):
        return {}
    return env if isinstance(env, dict) else {}


def expected_runs(platform: str | None, profile: str | None, runs: Path = RUNS) -> list[Path]:
    """Every committed run of a platform's profile: docs/runs/<platform>-<profile> (the reference the documents
    quote) first, then on a CPU one per other CPU family measured, docs/runs/cpu-<profile>-<family> (its env.json
    says the CPU)."""
    main = runs / f"{platform}-{profile}"
    more = sorted(p.parent for p in runs.glob(f"{platform}-{profile}-*/env.json")) if platform == "cpu" else []
    return [f for f in (main, *more) if (f / "env.json").is_file()]


def is_reference(folder: Path) -> bool:
    """Whether a committed run is its platform's and profile's reference, docs/runs/<platform>-<profile> (not
    another CPU family's run of it): the runs the documents quote and the estimate's CPU ratios come from."""
    try:
        meta = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and folder.name == f"{meta.get('platform')}-{meta.get('profile')}"


def expected_run(platform: str | None, profile: str | None, cpu: str | None = None,
                 runs: Path = RUNS) -> Path | None:
    """The committed run a platform's profile is expected to reproduce, the one source of the expected results, the
    estimate's step times and the configuration they hold for: with `cpu` (this host's model), the run of the
    nearest CPU: of the same family (cpu_family) where one is committed, else of the same vendor (an Intel Core
    laptop reads the Intel Xeon's run), else the reference run, docs/runs/<platform>-<profile>. None if that
    platform and profile has no committed run."""
    found = expected_env(platform, profile, cpu, runs)
    return found[0] if found else None


def expected_env(platform: str | None, profile: str | None, cpu: str | None = None,
                 runs: Path = RUNS) -> tuple[Path, dict] | None:
    """expected_run's folder and its env.json, each candidate's env.json read once."""
    folders = expected_runs(platform, profile, runs)
    if not folders:
        return None
    if cpu is None:
        return folders[0], _env(folders[0])
    envs = [(f, _env(f)) for f in folders]
    family = cpu_family(cpu)
    for near in (lambda f: f == family, lambda f: f.split()[0] == family.split()[0]):
        for f, env in envs:
            if near(cpu_family((env.get("cpu") or {}).get("model"))):
                return f, env
    return envs[0]
