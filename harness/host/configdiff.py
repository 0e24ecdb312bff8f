"""How a run's configuration differs from the expected results' (the committed run of its platform and profile under
docs/runs/), and what each difference is known to move, with the measured size where a committed measurement has one.
 The expected results hold for one configuration: the memory allocator each framework's cells got
(harness/host/allocator.py
falls back silently where a library is absent), the framework versions, the usable cores, real or synthetic data, the
profile. The report's banner (harness/report/build.py), `harness report A B`'s labels and the check's allocator row
(harness/preflight/checks_allocator.py) all read it here. Standard library only: the check runs before any .venv.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.paths import REPO, expected_run

MEASURED = "docs/at-best/process_gap-resnet50-pytorch-{}.json"   # PyTorch's ResNet50 under each allocator
KINDS = (("pytorch", "model", "PyTorch's cells"), ("mindspore", "model", "MindSpore's model cells"),
         ("mindspore", "operator", "MindSpore's operator cells"))


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


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


def throughput(name: str, repo: Path = REPO) -> dict[int, float]:
    """{batch: images/s} of PyTorch's ResNet50 under allocator `name`, as committed (MEASURED); {} where not
    measured."""
    return {r["batch"]: r["harness"] for r in _load(repo / MEASURED.format(name)).get("rows", []) if r.get("harness")}


def effect(got: str, want: str, repo: Path = REPO, measured: dict[str, dict[int, float]] | None = None) -> str:
    """PyTorch's ResNet50 throughput under allocator `got` against `want`, per batch, from the committed
    measurements (benchmarks/process_gap.py; `measured`: them as `throughput` read them, and no file is read);
    "" where either was not measured."""
    rows = {name: (measured.get(name) or {}) if measured is not None else throughput(name, repo)
            for name in (got, want)}
    batches = sorted(set(rows[got]) & set(rows[want]))
    if not batches:
        return ""
    parts = ", ".join(f"{rows[got][b] / rows[want][b]:.2f}x at batch {b}" for b in batches)
    return (f"measured: PyTorch's ResNet50 on 2 cores under {got} ran at {parts} of its {want} throughput "
            f"({MEASURED.format('*')})")


EFFECT = "docs/runs/allocator/effect.json"   # harness.host.allocator_effect: Figure 5 and C1 under each allocator


def allocator_runs(repo: Path = REPO) -> dict[str, Any]:
    """EFFECT as committed ({} where missing or unreadable)."""
    return _load(repo / EFFECT)


def _join(values: Any) -> str:
    return ", ".join(str(v) for v in values)


def _verdicts(claim: str, runs: list[dict[str, Any]]) -> str:
    got = [r["verdicts"][claim] for r in runs]
    return f"{claim} {got[0]} in every run" if len(set(got)) == 1 else f"{claim} {_join(got)}"


def runs_effect(got: str, want: str, repo: Path = REPO, data: dict[str, Any] | None = None) -> dict[str, str]:
    """What the committed runs under docs/runs/allocator measured with PyTorch's cells under `got` against `want`
    (the runs are told apart by that allocator: a host without tcmalloc changes every kind of cell at once), as
    {"where": ..., "c1": ..., "figure5": ...} texts; {} where either configuration has no run. `data`: EFFECT as
    read already (no file is read then)."""
    data = allocator_runs(repo) if data is None else data
    runs = {name: [r for r in data.get("runs", []) if r.get("pytorch_model_allocator") == name] for name in (got, want)}
    if not (runs[got] and runs[want]):
        return {}

    model = data.get("headline")

    def c1(name: str) -> str:
        ratios = _join(f"{r['c1'][model]['ratio']:.2f}" for r in runs[name] if model in r["c1"])
        return f"{ratios} under {name} ({_verdicts('C1', runs[name])})"

    def ops(name: str) -> str:
        moved = [len(r["operators_outside_baseline"]) for r in runs[name] if r["run"] != r["baseline"]]
        return (f"{_join(moved)} of {len(runs[name][0]['operators'])} under {name} "
                f"({_verdicts('O1', runs[name])})")

    host = runs[want][0].get("cpu") or "?"
    where = f"one 2-core {host} host, {len(runs[got])} and {len(runs[want])} runs ({EFFECT.rsplit('/', 1)[0]})"
    return {"where": f"measured on {where}",
            "c1": f"C1's {data.get('headline_name')} MindSpore/PyTorch ratio {c1(got)} against {c1(want)}",
            "figure5": f"Figure 5's ratios outside the intervals of the first {want} run: {ops(got)} against "
                       f"{ops(want)}"}


def outside(run: dict[str, Any], base: dict[str, Any]) -> list[str]:
    """The operator configurations whose ratio in `run` lies outside `base`'s interval for it (two summaries of
    harness.host.allocator_effect; an interval without an upper end bounds only from below)."""
    want = {o["config"]: o["interval"] for o in base.get("operators", []) if o.get("interval")}
    return [o["config"] for o in run["operators"] if (iv := want.get(o["config"])) and o["ratio"] is not None
            and not iv[0] <= o["ratio"] <= (iv[1] if iv[1] is not None else o["ratio"])]


def runs_cpu_effect(got: str, want: str, repo: Path = REPO, data: dict[str, Any] | None = None) -> str:
    """What the committed runs measured between CPU `want` (the expected run's) and `got`, both with the expected
    results' allocators: C1's per-model ratios and how many of Figure 5's ratios left the expected run's intervals;
    "" where docs/runs/allocator has no such run on `got`. `data`: EFFECT as read already (no file is read then)."""
    data = allocator_runs(repo) if data is None else data
    ref = data.get("expected") or {}
    same = [r for r in data.get("runs", []) if r.get("cpu") == got and r.get("allocators") == ref.get("allocators")]
    if not same or ref.get("cpu") != want:
        return ""

    def here(m: str) -> str:
        return _join(f"{r['c1'][m]['ratio']:.2f}" for r in same)

    c1 = "; ".join(f"{m} {ref['c1'][m]['ratio']:.2f} there, {here(m)} here"
                   for m in ref.get("c1", {}) if all(m in r["c1"] for r in same))
    return (f"measured with the same allocators ({EFFECT.rsplit('/', 1)[0]}, {len(same)} runs on {got}): C1's "
            f"MindSpore/PyTorch ratios {c1}; Figure 5: {_join(len(outside(r, ref)) for r in same)} of "
            f"{len(same[0]['operators'])} ratios outside the expected run's intervals")


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


def expected_for(meta: dict[str, Any], env: dict[str, Any]) -> Path | None:
    """The committed run a run's results are compared with: of its platform and profile, the nearest its CPU
    (harness.paths.expected_run)."""
    return expected_run(meta.get("platform"), meta.get("profile"), (env.get("cpu") or {}).get("model"))


def differences(meta: dict[str, Any], env: dict[str, Any], folder: Path | None) -> list[dict[str, str]]:
    """What of this run's configuration differs from its expected results' (`folder`: expected_for's answer, found
    once by the caller), each {what, here, expected, moves}."""
    platform, profile = meta.get("platform"), meta.get("profile")
    if folder is None:
        return [{"what": "expected results", "here": f"{platform}, {profile} profile", "expected": "none committed",
                 "moves": f"nothing to compare with: no committed run of {platform}-{profile} under docs/runs"}]
    want_meta, want_env = _load(folder / "run.json"), _load(folder / "env.json")
    out = []
    got_alloc, want_alloc = allocators(env), allocators(want_env)
    runs = runs_effect(got_alloc.get(("pytorch", "model"), ""), want_alloc.get(("pytorch", "model"), ""))
    for fw, kind, label, g, w in allocator_changes(got_alloc, want_alloc):
        quote = {k: f"{runs['where']}: {runs[k]}" for k in ("c1", "figure5") if k in runs}
        moves = "; ".join(filter(None, ("C1 and every PyTorch CPU throughput", effect(g, w), quote.get("c1")))) \
            if fw == "pytorch" else "; ".join(filter(None, (
                "Figure 5's operator ratios (MindSpore's operator processes agree with each other under tcmalloc, "
                "not under glibc: docs/methodology/operators.md)", quote.get("figure5")))) if kind == "operator" else ""
        out.append({"what": f"allocator of {label}", "here": g, "expected": w, "moves": moves})
    for package, name in (("torch", "PyTorch"), ("mindspore", "MindSpore")):
        g, w = (env.get("packages") or {}).get(package), (want_env.get("packages") or {}).get(package)
        if g != w:
            out.append({"what": f"{name} version", "here": str(g), "expected": str(w),
                        "moves": "every comparison of that framework's cells"})
    g, w = (env.get("cpu") or {}).get("model"), (want_env.get("cpu") or {}).get("model")
    if g and w and g != w:
        out.append({"what": "CPU", "here": str(g), "expected": str(w),
                    "moves": "every CPU throughput and ratio: each framework's CPU kernels dispatch by instruction "
                             "set and cache sizes (oneDNN in both; the harness caps MindSpore's at AVX2 on AVX-512 "
                             "CPUs), so the frameworks need not gain or lose alike"
                             + (f"; {cpu_effect}" if (cpu_effect := runs_cpu_effect(g, w)) else "")})
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
