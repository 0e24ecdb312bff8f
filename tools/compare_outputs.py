"""Render the claims and the report of recorded results into a folder, to diff two versions of the harness.

    python tools/compare_outputs.py OUT [PREFIX]   # then, after a change: ... OUT2; diff -r OUT OUT2

PREFIX renders only the cases whose names start with it.

Cases (each a run folder rendered with `report.render`, and the claims evaluated on its results):
    fixture       tests/fixtures/results_quick.json, a real quick-profile run (one repeat per cell)
    subset-NN     20 seeded random subsets of its cells
    repeats-NN    5 seeded variants with 3 repeats per cell: values scaled per repeat, some repeats that never
                  reached their target (time_to_target_s null), some failed, and made-up companion cells
                  (LSTM/GoogLeNet training, inference, passes): the cases where the ways of combining repeats
                  can differ
Per case: claims.json (every claim's fields), time_to_target.json, companion.json (the companion section's rows),
report.html (figures' SVG included), report.tex and tables/*.tex. PDFs are not written out (they carry dates).
"""

from __future__ import annotations

import copy
import json
import random
import re
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
    from harness import cellid

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
    """Every cell three times, numbers scaled per repeat; a time to target dropped (never reached) in about a
    third of the repeats that have one, given to some that had none, and about one repeat in twelve failed."""
    rng = random.Random(seed)  # noqa: S311 (test data, seeded)
    base = quick + _companion_cells(rng, quick)
    out = []
    for r in base:
        for k in range(3):
            c = {**copy.deepcopy(r), "repeat": k}
            for key in NUMBERS:
                if isinstance(c.get(key), int | float) and not isinstance(c.get(key), bool):
                    c[key] = c[key] * rng.uniform(0.8, 1.25)
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


def normalise(text: str, work: Path) -> str:
    """The temporary folder's name and the date matplotlib writes into each SVG are the only parts that change
    from one rendering to the next."""
    return re.sub(r"<dc:date>[^<]*</dc:date>", "<dc:date/>", text.replace(str(work), "WORK"))


def render_case(name: str, results: list[dict], out: Path, work: Path) -> None:
    from harness import claims, report

    run = write_run(work / name, results)
    dest = out / name
    dest.mkdir(parents=True)
    meta = {"platform": "cpu", "profile": "quick"}
    found = claims.evaluate(results, **meta)
    (dest / "claims.json").write_text(json.dumps([c.to_dict() for c in found], indent=1, sort_keys=True))
    (dest / "time_to_target.json").write_text(json.dumps(claims.time_to_target_table(results, platform="cpu"),
                                                         indent=1, sort_keys=True))
    report.render([run], work / f"{name}-report")
    rendered = work / f"{name}-report"
    for path in [rendered / "report.html", rendered / "report.tex", *sorted((rendered / "tables").glob("*.tex"))]:
        target = dest / path.relative_to(rendered)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(normalise(path.read_text(), work))
    from harness import companion

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


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    done = render_all(Path(sys.argv[1]), *sys.argv[2:])
    print(f"{len(done)} cases rendered into {sys.argv[1]}")
