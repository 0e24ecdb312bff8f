"""Each framework at its best at the process level: the harness cell exactly as the runner launches it (its own
process, its environment and allocator, telemetry on) against the reference loop in a fresh plain process.
 benchmarks/reference_gap.py compares the two loops inside one process, which cannot see what differs between
processes: the allocator the process got, the malloc threshold's history, thread placement. Here every turn is a
new process:
  harness:   `python -m harness run --platform PLATFORM --profile P --only CELL` on a copy of the matrix whose profile
             line for the model is cut to `--steps` steps a epoch at the batch asked for, 2 epochs; the figure is the
             result's steady throughput (mean_throughput_other_epochs: the second epoch, after a warm-up epoch).
  reference: this file with --reference, in a fresh interpreter with the framework's process settings but the
             allocator left as it is (HARNESS_ALLOCATOR=system: a user's own script), the same data, weights and
             batches (harness/models/<model>/reference_<fw>.py), one warm-up epoch and one timed epoch, on the
             cell's device (`--platform cuda|ascend`: the reference loops' documented GPU way).
The two take turns, the order swapping every round. `--allocator` sets HARNESS_ALLOCATOR for the harness side
(`system` gives the "before" of the allocator change). The load average is printed before and after: a figure
taken with anything else running is not evidence.

    python benchmarks/process_gap.py --model resnet50 --batches 16,32,128 [--frameworks pytorch] [--modes eager]
        [--rounds 3] [--steps 2] [--allocator auto|system|jemalloc|tcmalloc|glibc-tuned] [--platform cpu|cuda|ascend]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from functools import partial
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402
from benchmarks.alternate import alternate  # noqa: E402
from harness.config import (  # noqa: E402
    cellid,
    matrix,  # noqa: E402
)
from harness.frameworks import backend as load_backend  # noqa: E402


def _inline(value) -> str:
    """A TOML inline value (the matrix's profile lines hold numbers, strings, booleans, lists and tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def sized_matrix(model: str, profile: str, batch: int | None, steps: int, out: Path) -> Path:
    """A copy of harness/config/matrix.toml whose `profile.<profile>` line of [models.<model>] runs 2 epochs of `steps`
    steps at `batch` (the profile's own batch when None), evaluating on one batch, never stopping at a target."""
    text = (REPO / "harness" / "config" / "matrix.toml").read_text()
    section = re.search(rf"^\[models\.{model}\]\n(.*?)(?=^\[)", text, re.M | re.S)
    line = re.search(rf"^profile\.{profile} = (\{{.*\}})$", section.group(1), re.M)
    spec = tomllib.loads(f"x = {line.group(1)}")["x"] if line else {}
    hparams = tomllib.loads(text)["models"][model].get("hparams", {}) | spec.get("hparams", {})
    spec |= {"stop_at_target": False, "evals_per_epoch": 1}
    if "batch" in hparams:
        b = batch or hparams["batch"]
        spec |= {"epochs": 2, "train_samples": b * steps, "eval_samples": b,
                 "hparams": spec.get("hparams", {}) | {"batch": b}}
    else:  # full-batch (GCN): an epoch is one step of milliseconds; 50 steps a timed epoch
        spec |= {"epochs": 1 + 50 * steps}
    spec.pop("val_samples", None)
    new = f"profile.{profile} = {_inline(spec)}"
    body = section.group(1)
    body = body.replace(line.group(0), new) if line else body.rstrip("\n") + f"\n{new}\n\n"
    out.write_text(text[:section.start(1)] + body + text[section.end(1):])
    return out


def harness_turn(cell_id: str, profile: str, matrix_file: Path, allocator: str, data_dir: str,
                 platform: str = "cpu") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "HARNESS_ALLOCATOR": allocator}
        proc = subprocess.run([sys.executable, "-m", "harness", "run", "--platform", platform, "--profile", profile,
                               "--matrix", str(matrix_file), "--only", cell_id, "--data-dir", data_dir,
                               "--synthetic", "cifar10", "--out", f"{tmp}/run"],
                              capture_output=True, text=True, env=env, cwd=REPO)
        results = sorted(Path(tmp, "run", "cells").rglob("r0.json"))
        if not results:
            raise RuntimeError(f"harness run gave no result: {proc.stderr.strip()[-500:]}")
        r = json.loads(results[0].read_text())
        if r.get("status") != "ok":
            raise RuntimeError(f"harness cell {r.get('status')}: {r.get('reason')}")
        return {"throughput": r["mean_throughput_other_epochs"], "allocator": r["process_env"].get(
            "HARNESS_ALLOCATOR_USED"), "peak_rss_mb": r.get("peak_rss_mb")}


def reference_turn(cell_id: str, profile: str, matrix_file: Path, data_dir: str, platform: str = "cpu") -> dict:
    framework = cellid.parse(cell_id).framework
    os.environ["HARNESS_ALLOCATOR"] = "system"  # the framework's settings without the harness's allocator
    env = {**os.environ, **load_backend(framework).process_env(platform), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, __file__, "--reference", cell_id, "--profile", profile, "--matrix",
                           str(matrix_file), "--data-dir", data_dir, "--platform", platform], capture_output=True,
                          text=True, env=env, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise RuntimeError(f"reference failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reference_child(cell_id: str, profile: str, matrix_file: Path, data_dir: str, platform: str = "cpu") -> dict:
    """In this fresh process: the framework's context as the back-end sets it, the reference loop, one warm-up
    epoch and one timed epoch (the device synchronised before the clock is read)."""
    from benchmarks.reference_gap import build_reference, set_up_on
    from harness import data as datasets

    cell = next(c for c in matrix.load(matrix_file).expand(profile) if c.id == cell_id)
    dataset = cell.dataset
    real = Path(data_dir, datasets.module(dataset).FOLDER).is_dir() and dataset != "cifar10"
    folder = str(datasets.prepare(dataset, Path(data_dir), False)) if real else None
    s = set_up_on(cell, folder, platform, until="data")
    reference = build_reference(s)
    reference.train_epoch(0)
    t = time.perf_counter()
    reference.train_epoch(1)
    s.backend.synchronize(s.ctx)
    return {"throughput": reference.samples_per_epoch / (time.perf_counter() - t)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--profile", default="quick", help="the profile whose cell (sizes, hyperparameters) is run")
    p.add_argument("--batches", default="", help="batch sizes (default: the profile's own)")
    p.add_argument("--frameworks", default="pytorch,mindspore")
    p.add_argument("--modes", default="eager,graph,pynative")
    p.add_argument("--amp", default="off")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=2, help="training steps a epoch (2 epochs: warm-up, timed)")
    p.add_argument("--allocator", default="auto", help="HARNESS_ALLOCATOR of the harness side")
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", type=Path)
    p.add_argument("--platform", default="cpu", choices=("cpu", "cuda", "ascend"))
    p.add_argument("--reference", help=argparse.SUPPRESS)
    p.add_argument("--matrix", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.reference:
        print(json.dumps(reference_child(a.reference, a.profile, a.matrix, a.data_dir, a.platform)))
        return 0
    print(f"load average before: {loadavg()}  (1, 5, 15 min; {os.cpu_count()} cores)", flush=True)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="process_gap."))
    for batch in [int(b) for b in a.batches.split(",") if b] or [None]:
        mfile = sized_matrix(a.model, a.profile, batch, a.steps, work / f"matrix-{batch}.toml")
        cells = [c for c in matrix.load(mfile).expand(a.profile) if c.kind == "model" and c.model == a.model
                 and c.devices == 1 and c.framework in a.frameworks.split(",") and c.mode in a.modes.split(",")
                 and c.amp in a.amp.split(",")]
        for cell in cells:
            b = cell.spec.hparams.get("batch", "full")
            name = f"{cell.model} b{b} {cell.framework} {cell.mode} amp-{cell.amp}"
            try:
                pairs = alternate(partial(harness_turn, cell.id, a.profile, mfile, a.allocator, a.data_dir, a.platform),
                                  partial(reference_turn, cell.id, a.profile, mfile, a.data_dir, a.platform),
                                  a.rounds)
            except RuntimeError as e:
                print(f"{name:<40} failed: {e}", flush=True)
                rows.append({"cell": cell.id, "batch": b, "status": "failed", "error": str(e)})
                continue
            ratios = [h["throughput"] / r["throughput"] for h, r in pairs]
            row = {"cell": cell.id, "model": cell.model, "framework": cell.framework, "mode": cell.mode,
                   "amp": cell.amp, "batch": b, "profile": a.profile, "platform": a.platform,
                   "unit": cell.spec.throughput_unit,
                   "allocator_requested": a.allocator, "allocator": pairs[0][0]["allocator"], "status": "ok",
                   "harness": median(h["throughput"] for h, _ in pairs),
                   "reference": median(r["throughput"] for _, r in pairs), "ratio": median(ratios),
                   "ratios": ratios, "rounds": [{"harness": h, "reference": r} for h, r in pairs]}
            rows.append(row)
            print(f"{name:<40} allocator {row['allocator']:<11} harness {row['harness']:8.2f} reference "
                  f"{row['reference']:8.2f} ratio {row['ratio']:.3f}  per round "
                  + " ".join(f"{x:.2f}" for x in ratios) + f"  ({row['unit']})", flush=True)
    print(f"load average after: {loadavg()}", flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                                     "command": " ".join(sys.argv), "rows": rows}, indent=1))
        print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
