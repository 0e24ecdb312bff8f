"""How a run's configuration differs from the expected results' (the committed run of its platform and profile under
docs/runs/), and what each difference is known to move, with the measured size where a committed measurement has one.

The expected results hold for one configuration: the memory allocator each framework's cells got (harness/allocator.py
falls back silently where a library is absent), the framework versions, the usable cores, real or synthetic data, the
profile. The report's banner (harness/report.py), `harness report A B`'s labels and the check's allocator row
(harness/preflight/checks_allocator.py) all read it here. Standard library only: the check runs before any .venv.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "docs" / "runs"
MEASURED = "docs/at-best/process_gap-resnet50-pytorch-{}.json"   # PyTorch's ResNet50 under each allocator
KINDS = (("pytorch", "model", "PyTorch's cells"), ("mindspore", "model", "MindSpore's model cells"),
         ("mindspore", "operator", "MindSpore's operator cells"))


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def expected_run(platform: str | None, profile: str | None) -> Path | None:
    """The committed run the expected results of this platform and profile come from, if there is one."""
    folder = RUNS / f"{platform}-{profile}"
    return folder if (folder / "env.json").is_file() else None


def allocators(env: dict[str, Any]) -> dict[tuple[str, str], str]:
    """{(framework, kind): allocator} as a run's env.json recorded them."""
    a = env.get("allocators") or {}
    return {**{(fw, "model"): name for fw, name in (a.get("per_framework") or {}).items()},
            **{(fw, "operator"): name for fw, name in (a.get("operator_cells_on_cpu") or {}).items()}}


def allocator_changes(got: dict[tuple[str, str], str],
                      want: dict[tuple[str, str], str]) -> list[tuple[str, str, str, str, str]]:
    """(framework, kind, label, got, wanted) for every kind of cell whose allocator differs between two
    {(framework, kind): allocator} maps (allocators(), or the check's for this host), where both name one."""
    return [(fw, kind, label, got[(fw, kind)], want[(fw, kind)]) for fw, kind, label in KINDS
            if got.get((fw, kind)) and want.get((fw, kind)) and got[(fw, kind)] != want[(fw, kind)]]


def allocator_signature(env: dict[str, Any]) -> str:
    """A short text of the allocators a run's cells got (what tells two such runs apart in a report's labels)."""
    got = allocators(env)
    return ", ".join(f"{fw} {kind} {got[(fw, kind)]}" for fw, kind, _ in KINDS if (fw, kind) in got)


def effect(got: str, want: str, repo: Path = REPO) -> str:
    """PyTorch's ResNet50 throughput under allocator `got` against `want`, per batch, from the committed
    measurements (benchmarks/process_gap.py); "" where either was not measured."""
    rows = {}
    for name in (got, want):
        data = _load(repo / MEASURED.format(name))
        rows[name] = {r["batch"]: r["harness"] for r in data.get("rows", []) if r.get("harness")}
    batches = sorted(set(rows[got]) & set(rows[want]))
    if not batches:
        return ""
    parts = ", ".join(f"{rows[got][b] / rows[want][b]:.2f}x at batch {b}" for b in batches)
    return (f"measured: PyTorch's ResNet50 on 2 cores under {got} ran at {parts} of its {want} throughput "
            f"({MEASURED.format('*')})")


# Host settings the frameworks meet without choosing them (nothing in the harness sets or needs them, so nothing
# falls back): recorded in env.json and compared where both runs recorded them.
TUNING = {"transparent_hugepage": "/sys/kernel/mm/transparent_hugepage/enabled",
          "cpu_governor": "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"}


def host_tuning() -> dict[str, str | None]:
    """This host's transparent huge pages mode and CPU frequency governor (None where the kernel does not say: a
    virtual machine often has no cpufreq)."""
    out: dict[str, str | None] = {}
    for key, path in TUNING.items():
        try:
            text = Path(path).read_text().strip()
        except OSError:
            out[key] = None
            continue
        chosen = [w[1:-1] for w in text.split() if w.startswith("[") and w.endswith("]")]
        out[key] = chosen[0] if chosen else text
    return out


def differences(meta: dict[str, Any], env: dict[str, Any]) -> list[dict[str, str]]:
    """What of this run's configuration differs from its expected results', each {what, here, expected, moves}."""
    platform, profile = meta.get("platform"), meta.get("profile")
    folder = expected_run(platform, profile)
    if folder is None:
        return [{"what": "expected results", "here": f"{platform}, {profile} profile", "expected": "none committed",
                 "moves": f"nothing to compare with: no committed run of {platform}-{profile} under docs/runs"}]
    want_meta, want_env = _load(folder / "run.json"), _load(folder / "env.json")
    out = []
    for fw, kind, label, g, w in allocator_changes(allocators(env), allocators(want_env)):
        moves = ("C1 and every PyTorch CPU throughput; " + effect(g, w)).rstrip("; ") if fw == "pytorch" else (
            "Figure 5's operator ratios (MindSpore's operator processes agree with each other under tcmalloc, "
            "not under glibc: docs/methodology/operators.md)" if kind == "operator" else "")
        out.append({"what": f"allocator of {label}", "here": g, "expected": w, "moves": moves})
    for package, name in (("torch", "PyTorch"), ("mindspore", "MindSpore")):
        g, w = (env.get("packages") or {}).get(package), (want_env.get("packages") or {}).get(package)
        if g != w:
            out.append({"what": f"{name} version", "here": str(g), "expected": str(w),
                        "moves": "every comparison of that framework's cells"})
    g, w = (env.get("cpu") or {}).get("usable_cores"), (want_env.get("cpu") or {}).get("usable_cores")
    if g != w:
        out.append({"what": "usable cores", "here": str(g), "expected": str(w),
                    "moves": "every CPU throughput, and the ratios where the frameworks scale differently"})
    for key, value in (env.get("host_tuning") or {}).items():
        w = (want_env.get("host_tuning") or {}).get(key, "not recorded")
        if w != "not recorded" and value != w:
            out.append({"what": key.replace("_", " "), "here": str(value), "expected": str(w),
                        "moves": "CPU throughput (not measured here)"})
    g, w = meta.get("synthetic"), want_meta.get("synthetic")
    if g != w:
        out.append({"what": "synthetic data", "here": str(g or "none"), "expected": str(w or "none"),
                    "moves": "accuracy and time to target of the cells on that data (throughput stays comparable)"})
    return out
