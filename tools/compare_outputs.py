"""Render the claims and the report of recorded results into a folder, to diff two versions of the harness.

    python tools/compare_outputs.py OUT [PREFIX]           # this checkout's harness
    python tools/compare_outputs.py --at COMMIT OUT         # the harness and templates of COMMIT (git archive)
    python tools/compare_outputs.py --explain               # where the old rules for a time to target disagreed
    diff -r OUT_BEFORE OUT_AFTER

PREFIX renders only the cases whose names start with it.

Cases (each a run folder rendered with `report.render`, and the claims evaluated on its results):
    fixture       tests/fixtures/results_quick.json, a real quick-profile run (one repeat per cell)
    subset-NN     20 seeded random subsets of its cells
    repeats-NN    5 seeded variants with 3 repeats per cell: values scaled per repeat, some repeats that never
                  reached their target (time_to_target_s null), some failed, and made-up companion cells
                  (LSTM/GoogLeNet training, inference, passes): the cases where the ways of combining repeats
                  can differ
Per case: claims.json ({"claims": every claim's fields with its own caveats, "run_caveats": those said once for
them all; a harness from before run_caveats writes no such key and every caveat under each claim}),
time_to_target.json, companion.json (the companion section's rows), figures.json (what the figures are drawn from:
each row's curve and medians, the operator ratios), report.html (figures' SVG included), report.tex and tables/*.tex.
PDFs are not written out (they carry dates).
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "results_quick.json"
SUBSETS = 20
REPEAT_VARIANTS = 5


def write_run(folder: Path, results: list[dict], platform: str = "cpu", profile: str = "quick") -> Path:
    (folder / "cells").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"platform": platform, "profile": profile, "invocations": []}))
    (folder / "env.json").write_text(json.dumps({"hostname": "ci", "cpu": {"model": "Intel(R) Xeon(R)", "cores": 2},
                                                 "packages": {"torch": "2.13.0+cpu", "mindspore": "2.10.0"}}))
    for r in results:
        d = folder / "cells" / r["cell"]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"r{r.get('repeat', 0)}.json").write_text(json.dumps(r))
    return folder


def _companion_cells(rng: random.Random, quick: list[dict]) -> list[dict]:
    """Made-up companion-study cells: LSTM and GoogLeNet training (from the GCN cells), inference and passes."""
    from harness.config import cellid

    out = []
    for r in quick:
        if r["kind"] == "model" and r["model"] == "gcn" and r["mode"] in ("eager", "graph"):
            for name in ("lstm", "googlenet"):
                c = {**copy.deepcopy(r), "model": name, "cell": cellid.model_id(name, r["framework"], r["mode"],
                                                                                r["amp"], 1)}
                c["wall_s"] = round(rng.uniform(5, 50), 3)
                c["epochs"] = [{"train_s": round(rng.uniform(1, 9), 3), "loss": round(rng.uniform(0.1, 1), 4)}
                               for _ in range(2)]
                c["test_metric"] = round(rng.uniform(0.6, 0.9), 4)
                out.append(c)
    for fw, mode in (("pytorch", "eager"), ("mindspore", "graph")):
        out.append({"cell": cellid.inference_id("resnet50_imagenet", fw, mode, "off", 16), "kind": "inference",
                    "model": "resnet50_imagenet", "framework": fw, "mode": mode, "amp": "off", "batch": 16,
                    "status": "ok", "repeat": 0, "platform": "cpu", "throughput": rng.uniform(50, 100),
                    "median_s": rng.uniform(0.1, 0.3), "iqr_s": rng.uniform(0.001, 0.01)})
        out.append({"cell": cellid.passes_id("lstm", fw, mode, 2), "kind": "passes", "model": "lstm", "framework": fw,
                    "mode": mode, "threads": 2, "batch": 16, "status": "ok", "repeat": 0, "platform": "cpu",
                    "forward_median_s": rng.uniform(0.01, 0.02), "forward_iqr_s": rng.uniform(1e-4, 1e-3),
                    "gradient_median_s": rng.uniform(0.02, 0.05), "gradient_iqr_s": rng.uniform(1e-4, 1e-3)})
    return out


NUMBERS = ("first_epoch_throughput", "mean_throughput_other_epochs", "throughput", "global_throughput",
           "per_device_throughput", "efficiency", "median_s", "iqr_s", "best_metric", "test_metric", "wall_s",
           "forward_median_s", "gradient_median_s", "time_to_target_s")


def with_repeats(seed: int, quick: list[dict]) -> list[dict]:
    """Every cell three times, numbers (and the times of Figure 3's curve) scaled per repeat; a time to target
    dropped (never reached) in about a third of the repeats that have one, given to some that had none, and about
    one repeat in twelve failed."""
    rng = random.Random(seed)  # noqa: S311 (test data, seeded)
    base = quick + _companion_cells(rng, quick)
    out = []
    for r in base:
        for k in range(3):
            c = {**copy.deepcopy(r), "repeat": k}
            for key in NUMBERS:
                if isinstance(c.get(key), int | float) and not isinstance(c.get(key), bool):
                    c[key] = c[key] * rng.uniform(0.8, 1.25)
            if c.get("curve"):
                f = rng.uniform(0.8, 1.25)
                c["curve"] = [[t * f, v] for t, v in c["curve"]]
            if c["kind"] == "model":
                if c.get("time_to_target_s") is not None and rng.random() < 0.35:
                    c["time_to_target_s"] = None
                elif c.get("time_to_target_s") is None and rng.random() < 0.3:
                    c["time_to_target_s"] = rng.uniform(1, 20)
            if rng.random() < 1 / 12:
                c.update(status="failed", reason="exit code 1: boom")
            out.append(c)
    return out


def cases() -> dict[str, list[dict]]:
    quick = json.loads(FIXTURE.read_text())
    out = {"fixture": quick}
    cells = sorted({r["cell"] for r in quick})
    for seed in range(SUBSETS):
        rng = random.Random(seed)  # noqa: S311 (test data, seeded)
        keep = set(rng.sample(cells, rng.randint(1, len(cells))))
        out[f"subset-{seed:02d}"] = [r for r in quick if r["cell"] in keep]
    for seed in range(REPEAT_VARIANTS):
        out[f"repeats-{seed:02d}"] = with_repeats(seed, quick)
    return out


FIGURE_KEYS = ("host", "cell", "curve", "global_throughput", "efficiency", "other_epochs", "samples_per_joule")


def normalise(text: str, work: Path) -> str:
    """The temporary folder's name and the date matplotlib writes into each SVG are the only parts that change
    from one rendering to the next."""
    return re.sub(r"<dc:date>[^<]*</dc:date>", "<dc:date/>", text.replace(str(work), "WORK"))


def render_case(name: str, results: list[dict], out: Path, work: Path) -> None:
    from harness import claims
    from harness.report import build as report

    run = write_run(work / name, results)
    dest = out / name
    dest.mkdir(parents=True)
    meta = {"platform": "cpu", "profile": "quick"}
    found = claims.evaluate(results, **meta)
    out = {"claims": [c.to_dict() for c in found]}
    if hasattr(claims, "run_caveats"):  # a harness before it (--at) kept every caveat under each claim
        out["run_caveats"] = claims.run_caveats(results, **meta, claims=found)
    (dest / "claims.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    (dest / "time_to_target.json").write_text(json.dumps(claims.time_to_target_table(results, platform="cpu"),
                                                         indent=1, sort_keys=True))
    report.render([run], work / f"{name}-report")
    data = report.collect([run])  # what the figures are drawn from, for a diff that needs no reading of SVG
    (dest / "figures.json").write_text(json.dumps(
        {"rows": [{k: r[k]["median"] if isinstance(r.get(k), dict) else r.get(k) for k in FIGURE_KEYS}
                  for r in data["rows"]], "op_ratios": data["op_ratios"]}, indent=1, sort_keys=True))
    rendered = work / f"{name}-report"
    for path in [rendered / "report.html", rendered / "report.tex", *sorted((rendered / "tables").glob("*.tex"))]:
        target = dest / path.relative_to(rendered)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(normalise(path.read_text(), work))
    from harness.report import companion

    hosts = [{"label": "cpu", "runs": [str(run)], "meta": meta, "env": {}}]
    (dest / "companion.json").write_text(json.dumps(companion.collect(hosts), indent=1, sort_keys=True))


def render_all(out: Path, only: str | None = None) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, results in cases().items():
            if only is None or name.startswith(only):
                render_case(name, results, out, Path(tmp))
                names.append(name)
    return names


def render_at(commit: str, out: Path) -> None:
    """The same cases rendered by the harness (and templates) of an earlier commit, in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "harness", "templates", "tests/fixtures"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        (Path(tmp) / "tools").mkdir()
        shutil.copy(__file__, Path(tmp) / "tools" / "compare_outputs.py")
        subprocess.run([sys.executable, str(Path(tmp) / "tools" / "compare_outputs.py"), str(out.resolve())],
                       check=True, cwd=tmp, env={**os.environ, "PYTHONPATH": tmp})


def ttt_rules(results: list[dict]) -> list[str]:
    """Where the old ways of combining repeats disagreed on a time to target: per cell with an ok repeat that never
    reached the target and one that did, the median over the repeats that reached it (the old report and companion
    section), the median with the others infinitely slow (the claims, now everywhere), and which repeat's curve
    Figure 3 draws before (by time to target, else wall time, else 0) and now (never reached: slowest)."""
    from harness.results import measure

    lines = []
    for cell, s in sorted(measure.summarise(results).items()):
        times = [r.get("time_to_target_s") for r in s.ok]
        if None not in times or all(t is None for t in times):
            continue
        dropped = statistics.median([t for t in times if t is not None])
        old_curve = sorted(s.ok, key=lambda r: r.get("time_to_target_s") or r.get("wall_s") or 0.0)[len(s.ok) // 2]
        new_curve = s.curve()
        lines.append(f"{cell}: times {[None if t is None else round(t, 3) for t in times]}; report and companion "
                     f"{dropped:.3f} -> {s.time_to_target.median}; Figure 3 curve of repeat "
                     f"{old_curve['repeat']} -> {next(r['repeat'] for r in s.ok if r['curve'] is new_curve)}")
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    if sys.argv[1:2] == ["--explain"]:
        for name, results in cases().items():
            for line in ttt_rules(results):
                print(f"{name} {line}")
    elif sys.argv[1:2] == ["--at"] and len(sys.argv) == 4:
        render_at(sys.argv[2], Path(sys.argv[3]))
    elif len(sys.argv) in (2, 3):
        done = render_all(Path(sys.argv[1]), *sys.argv[2:])
        print(f"{len(done)} cases rendered into {sys.argv[1]}")
    else:
        sys.exit(__doc__)
