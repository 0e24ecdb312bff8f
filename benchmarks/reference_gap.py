"""Each framework at its best: harness workload throughput / its framework's own recommended loop (goal >= 0.95).
 For each model x framework x mode x AMP level, one fresh process (as the runner gives every cell):
  harness:   the cell's workload (harness/models/<model>/<fw>.py build(), the back-end's setup() applied), its
             train_epoch() timed exactly as scenarios/training.py times it (clock around the epoch, device
             synchronised before the clock is read);
  reference: harness/models/<model>/reference_<fw>.py, the same network, weights, batches and hyperparameters
             written the way the framework's own documentation writes it (nn.TrainOneStepCell; PyTorch's
             standard loop), sharing no model or back-end code with the harness.
Both are built and warmed up (one epoch each: compilation, allocator, thread pools), then take turns, the order
swapping every round, EPOCHS_PER_BLOCK epochs a turn, so a slow phase of the host falls on both. Printed per
configuration: the median steady throughput of each and the median of the per-round ratios. `--out FILE` also
writes the table as JSON; `python -m harness report` shows it when the file lies in a run folder as
`reference_gap.json`.

`--platform cuda|ascend` runs both on the accelerator (the reference loops take the device: PyTorch's documented GPU
loop, see each reference_pytorch.py). `--preset accelerator` is the accelerator's one command: ResNet50 and the GRU at
the paper's batch 128 and BERT-base at batch 256 x sequence 128 (the matrix's accelerator profile), PyTorch eager,
fp32 and AMP, each turn long enough to time (>= ~2 s on an H200); `--tiny` shrinks it to the quick profile's sizes,
one round, to check that it runs end to end on CPU.

    python benchmarks/reference_gap.py [--models resnet50,gru,gcn] [--amp off,O2] [--rounds 4] [--profile quick]
        [--train-samples N] [--platform cpu|cuda|ascend] [--out FILE]
    python benchmarks/reference_gap.py --preset accelerator --platform cuda --data-dir DIR --out FILE [--tiny]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402
from benchmarks.alternate import alternate  # noqa: E402
from harness import data as datasets  # noqa: E402
from harness.config import (  # noqa: E402
    cellid,
    matrix,  # noqa: E402
)
from harness.config.context import CellContext  # noqa: E402
from harness.frameworks import backend as load_backend  # noqa: E402
from harness.host import envinfo  # noqa: E402
from harness.launch.inprocess import InProcess, set_up  # noqa: E402
from harness.models import model_module, reference_module  # noqa: E402

MODES = {"pytorch": ["eager"], "mindspore": ["graph", "pynative"]}
AMP = {"pytorch": {"off": "off", "O2": "O2"}, "mindspore": {"off": "off", "O2": "O2"}}
# Larger epochs than the quick profile's where one epoch is a step or two: a turn must be long against the clock.
# GoogLeNet: a 16-image step takes ~0.1 s (about 1/7 of ResNet50's), so 256 images make a ~2 s turn.
TRAIN_SAMPLES = {"resnet50": 48, "gru": 256, "googlenet": 256, "lstm": 1024, "bert": 64}
# GCN: a full-batch epoch takes 0.01-0.1 s; 100 a turn make each turn 1-10 s (at 20, 0.5 s turns spread 0.8-1.3).
EPOCHS_PER_BLOCK = {"resnet50": 1, "gru": 1, "gcn": 100, "googlenet": 1, "lstm": 1, "bert": 1}
# The accelerator's one command (`--preset accelerator`). Samples an epoch (None: the profile's) and epochs a turn, for
# a turn of >= ~2 s on an H200 (its rates measured there with this preset): ResNet50 at 6,000-7,200 images/s on
# synthetic CIFAR-10's 4,992 images an epoch (3 epochs, 2.1-2.5 s); the GRU at ~14,000 pairs/s on Multi30K's 29,000
# (one epoch, ~2 s); BERT-base at ~600 sequences/s in fp32 (8 steps of 256, ~3.4 s) and ~2,900 with AMP (24 steps,
# ~2.1 s). One round: the whole command takes ~140 s there, most of it start-up, data and cuDNN's autotuning.
PRESETS = {"accelerator": {"profile": "accelerator", "models": "resnet50,gru,bert", "frameworks": "pytorch",
                           "modes": "eager", "amp": "off,O2", "rounds": 1,
                           "train_samples": {"bert/off": 2048, "bert/O2": 6144}, "epochs_per_block": {"resnet50": 3}}}
# --tiny: the same configurations at the quick profile's sizes, one round: it runs end to end in a few minutes on CPU.
TINY = {"profile": "quick", "rounds": 1, "train_samples": {}, "epochs_per_block": {}}


def set_up_on(cell, folder: str | None, platform: str, until: str = "workload") -> InProcess:
    """harness.launch.inprocess.set_up on `platform` (set_up itself sets a cell up on CPU): the back-end's setup(), the
    data, the model file's workload (unless `until` is "data"), as the child process does on that platform."""
    if platform == "cpu":
        return set_up(cell, folder, until=until)
    ctx = CellContext(cell=cell, platform=platform, repeat=0, data_folder=folder, synthetic=folder is None)
    backend = load_backend(cell.framework)
    ctx.settings = backend.setup(ctx)
    s = InProcess(ctx, backend, datasets.for_context(ctx))
    if until == "workload":
        s.workload = model_module(cell.model, cell.framework).build(ctx, s.data)
    return s


def build_reference(s: InProcess):
    """The cell's reference loop on the cell's device (PyTorch's references take it; MindSpore's use the context's)."""
    cell = s.ctx.cell
    kwargs = {"device": str(s.backend.device(s.ctx))} if cell.framework == "pytorch" and s.ctx.platform != "cpu" else {}
    return reference_module(cell.model, cell.framework).build(s.data, s.ctx.hparams, cell.spec, cell.seed, cell.amp,
                                                              **kwargs)


def measure(cell_id: str, rounds: int, data_dir: str | None, profile: str = "quick",
            train_samples: int | None = None, platform: str = "cpu", epochs_per_block: int | None = None) -> dict:
    """In this process: build the harness workload and the reference, warm both, then alternate."""
    cell = next(c for c in matrix.load().expand(profile) if c.id == cell_id)
    k = epochs_per_block or EPOCHS_PER_BLOCK[cell.model]
    samples = train_samples or (TRAIN_SAMPLES.get(cell.model, cell.spec.train_samples) if profile == "quick"
                                else cell.spec.train_samples)
    # 2 + rounds * k epochs: the learning-rate schedules cover every epoch run here
    cell = replace(cell, spec=replace(cell.spec, epochs=2 + rounds * k, train_samples=samples))
    folder = str(datasets.prepare(cell.dataset, Path(data_dir), False)) if data_dir else None
    s = set_up_on(cell, folder, platform)
    ctx, backend, workload = s.ctx, s.backend, s.workload
    ref_mod = reference_module(cell.model, cell.framework)
    reference = build_reference(s)
    next_epoch = {"reference": 0}

    def harness_block() -> float:
        t = time.perf_counter()
        for _ in range(k):
            workload.train_epoch()
        backend.synchronize(ctx)
        return k * workload.samples_per_epoch / (time.perf_counter() - t)

    def reference_block() -> float:
        t = time.perf_counter()
        for _ in range(k):
            reference.train_epoch(next_epoch["reference"])
            next_epoch["reference"] += 1
        backend.synchronize(ctx)
        return k * reference.samples_per_epoch / (time.perf_counter() - t)

    t0 = time.perf_counter()
    workload.train_epoch()
    warm_h = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference.train_epoch(next_epoch["reference"])
    next_epoch["reference"] += 1
    warm_r = time.perf_counter() - t0
    pairs = alternate(harness_block, reference_block, rounds)
    ratios = [h / r for h, r in pairs]
    return {"cell": cell_id, "model": cell.model, "framework": cell.framework, "mode": cell.mode, "amp": cell.amp,
            "unit": cell.spec.throughput_unit, "harness": median(h for h, _ in pairs),
            "reference": median(r for _, r in pairs), "ratio": median(ratios), "ratios": ratios,
            "rounds": [{"harness": h, "reference": r} for h, r in pairs],
            "first_epoch_s": {"harness": warm_h, "reference": warm_r},
            "samples_per_block": k * workload.samples_per_epoch, "reference_loop": ref_mod.__doc__.splitlines()[0],
            "platform": platform, "settings": {k: v for k, v in ctx.settings.items() if k != "cpu_cores"},
            "prefetch": getattr(workload, "prefetch", None)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="resnet50,gru,gcn")
    p.add_argument("--frameworks", default="pytorch,mindspore")
    p.add_argument("--modes", default="eager,graph,pynative")
    p.add_argument("--amp", default="off,O2", help="AMP levels: off and/or O2 (PyTorch autocast, MindSpore O2)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--profile", default="quick", help="the profile whose cells (sizes, hyperparameters) are run")
    p.add_argument("--train-samples", type=int, help="samples an epoch (default: TRAIN_SAMPLES, else the profile's)")
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--out", type=Path, help="also write the results as JSON here")
    p.add_argument("--platform", default="cpu", choices=("cpu", "cuda", "ascend"))
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named set of configurations and sizes (see above)")
    p.add_argument("--tiny", action="store_true", help="with --preset: the quick profile's sizes, one round")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--epochs-per-block", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        dataset = matrix.load().data["models"][cellid.parse(a.child).model]["dataset"]
        folder = datasets.module(dataset).FOLDER
        data_dir = None if a.synthetic or not Path(a.data_dir, folder).is_dir() else a.data_dir
        print(json.dumps(measure(a.child, a.rounds, data_dir, a.profile, a.train_samples, a.platform,
                                 a.epochs_per_block)))
        return 0
    sizes: dict = {"train_samples": {}, "epochs_per_block": {}}
    if a.preset:
        preset = PRESETS[a.preset] | (TINY if a.tiny else {})
        for key in ("profile", "models", "frameworks", "modes", "amp", "rounds"):
            setattr(a, key, preset[key])
        sizes = preset
    print(f"load average before: {loadavg()}  (1, 5, 15 min; {os.cpu_count()} cores); platform {a.platform}",
          flush=True)
    want = {"model": a.models.split(","), "framework": a.frameworks.split(","), "mode": a.modes.split(","),
            "amp": a.amp.split(",")}
    cells = [c for c in matrix.load().expand(a.profile) if c.kind == "model" and c.devices == 1
             and all(getattr(c, axis) in values for axis, values in want.items())]
    print(f"harness / reference loop, steady throughput, {a.rounds} alternating rounds per configuration "
          f"(CIFAR-10 synthetic; Cora and Multi30K {'synthetic' if a.synthetic else 'real where present'})")
    print(f"{'configuration':<44} {'harness':>10} {'reference':>10} {'ratio':>6}  per round")
    rows = []
    for cell in cells:
        env = {**os.environ, **load_backend(cell.framework).process_env(a.platform),
               "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
        args = [sys.executable, __file__, "--child", cell.id, "--rounds", str(a.rounds), "--data-dir", a.data_dir]
        args += ["--profile", a.profile, "--platform", a.platform] + (["--synthetic"] if a.synthetic else [])
        samples = a.train_samples or sizes["train_samples"].get(f"{cell.model}/{cell.amp}",
                                                                  sizes["train_samples"].get(cell.model))
        args += ["--train-samples", str(samples)] if samples else []
        k = sizes["epochs_per_block"].get(cell.model)
        args += ["--epochs-per-block", str(k)] if k else []
        proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
        name = f"{cell.model} {cell.framework} {cell.mode} amp-{cell.amp}"
        if proc.returncode != 0:
            print(f"{name:<44} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else '?'}")
            rows.append({"cell": cell.id, "status": "failed", "error": proc.stderr[-2000:]})
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1]) | {"status": "ok"}
        rows.append(r)
        per_round = " ".join(f"{x:.2f}" for x in r["ratios"])
        flag = "" if r["ratio"] >= 0.95 else "  < 0.95"
        print(f"{name:<44} {r['harness']:>10,.1f} {r['reference']:>10,.1f} {r['ratio']:>6.3f}  {per_round}"
              f"  ({r['unit']}, {r['samples_per_block']} a turn, first epoch {r['first_epoch_s']['harness']:.1f} s)"
              f"{flag}", flush=True)
    print(f"load average after: {loadavg()}", flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        host = envinfo.capture(probe_frameworks=False).get("cpu")
        a.out.write_text(json.dumps({"measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                                     "command": " ".join(sys.argv), "platform": a.platform, "host": host,
                                     "rows": rows}, indent=1))
        print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
