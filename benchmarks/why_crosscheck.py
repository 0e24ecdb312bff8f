"""The profiled pass against timings that do not come from a profiler (harness.profiling):

    python benchmarks/why_crosscheck.py RUN_FOLDER [--out FILE]

1. GCN on Cora: the profile's dropout/random time per step (one step an epoch: full batch) against the same dropout
   calls timed standalone in each framework: PyTorch's F.dropout, MindSpore's nn.Dropout compiled in GRAPH mode, on
   the two shapes the GCN drops (the 2708 x 1433 input features and the 2708 x 16 hidden layer), in training mode.
2. ResNet50 (quick batch): the profile's convolution share of a step against the share its 53 convolutions, timed
   standalone in PyTorch, take of the model's own training step timed in the same process (a step's time differs from
   one process to the next on a shared host by more than its shares do). Each convolution is timed at the input shape
   and in the memory layout it sees in the model (forward hooks), forward and backward (input and weight gradients;
   the first convolution's input needs none).

Both use harness.scenarios.operator.ops.blocked_time (warm-up, blocks until the clock is negligible), each in its own
process under the memory allocator the framework's cells get, and compare the mean time per call: the profile's figure
is a mean (its total over the profiled steps), and a call's time need not have one mode. MindSpore's CPU dropout on the
2708 x 1433 input takes about 10.5 ms when both of its kernel's threads run on a 2-core host and about 20 ms when one
does (20 ms throughout under `taskset -c 0`); a median picks one mode, a mean weighs both as the training steps did. The
profile's figure is the one the report gives (its share of the profiled step times the measured step); the profiler's
own self time is printed beside it. MindSpore's dropout is timed with the output's first element read back, not the
whole 15 MB. It prints each pair, their ratio and whether it is within 20%, with the load average before and after: run
it with nothing else on the machine. Exit code 1 where a pair is not within 20%. `--out FILE` adds this run's rows, load
averages and time to FILE (a JSON list of runs; docs/runs/<run>/why_crosscheck.json beside the run it checks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from statistics import fmean, median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.host import allocator  # noqa: E402
from harness.results.store import RunStore  # noqa: E402
from harness.scenarios.operator.ops import blocked_time  # noqa: E402

TOLERANCE = 0.20
GCN_SHAPES = ((2708, 1433), (2708, 16))


def mean_s(timing: dict) -> float:
    """The mean time per call over a blocked timing's blocks (every block holds the same number of calls)."""
    return fmean(timing["times_s"])


def profiled(run: Path, model: str, framework: str, mode: str) -> dict | None:
    """The profile of the run's `model` cell (AMP off) in `framework` and `mode`, as stored."""
    for r in RunStore(run).results():
        if (r.get("status"), r["model"], r["framework"], r["mode"], r["amp"]) == ("ok", model, framework, mode, "off") \
                and (r.get("profile") or {}).get("per_step_s"):
            return r["profile"]
    return None


def torch_dropout_s() -> float:
    import torch
    import torch.nn.functional as F

    xs = [torch.rand(*s) for s in GCN_SHAPES]
    return sum(mean_s(blocked_time(lambda x=x: F.dropout(x, 0.5, True), lambda: None, min_run_s=3.0)) for x in xs)


def mindspore_dropout_s() -> float:
    import mindspore as ms
    import numpy as np
    from mindspore import nn

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")

    class Drop(nn.Cell):   # the output's first element read back: the call has run, no 15 MB copy timed with it
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(p=0.5)

        def construct(self, x):
            return self.drop(x)[0:1, 0:1]

    total = 0.0
    for shape in GCN_SHAPES:
        drop = Drop()
        drop.set_train(True)
        x = ms.Tensor(np.random.rand(*shape).astype(np.float32))
        total += mean_s(blocked_time(lambda d=drop, x=x: d(x).asnumpy(), lambda: None, min_run_s=3.0))
    return total


def torch_convolutions_share() -> float:
    import torch
    from torch import nn

    from harness.config import matrix
    from harness.config.cell import Cell
    from harness.config.spec import model_spec
    from harness.launch.inprocess import set_up

    m = matrix.load()
    spec = model_spec(m.data["models"]["resnet50"], "quick")
    cell = Cell(id="x", kind="model", model="resnet50", framework="pytorch", mode="eager", amp="off", devices=1,
                repeats=1, timeout_s=0, seed=0, spec=spec)
    wl = set_up(cell).workload
    shapes = []
    hooks = [mod.register_forward_hook(lambda mod, args, out: shapes.append((mod, args[0].shape)))
             for mod in wl.net.modules() if isinstance(mod, nn.Conv2d)]
    wl.net.train()
    with torch.no_grad():
        wl.net(torch.rand(spec.hparams["batch"], 3, 32, 32).contiguous(memory_format=wl.layout))
    for h in hooks:
        h.remove()
    steps = []
    for i, (conv, shape) in enumerate(shapes):
        # in the memory layout the model trains in (channels_last on CPU): oneDNN's kernels differ by layout
        x = torch.rand(*shape).contiguous(memory_format=wl.layout).requires_grad_(i > 0)
        grad = torch.rand_like(conv(x))

        def step(conv=conv, x=x, grad=grad):
            conv.zero_grad(set_to_none=True)
            conv(x).backward(grad)

        steps.append(step)
    # The model's own training step on one batch, in this process: the share is what is compared, as step times
    # differ from one process to the next on a shared host by more than the shares do. Three rounds of (step,
    # convolutions, step), the median share: a host's speed drifts within a process too.
    x = torch.rand(spec.hparams["batch"], 3, 32, 32).contiguous(memory_format=wl.layout)
    y = torch.randint(0, 10, (spec.hparams["batch"],))

    def whole() -> float:
        return mean_s(blocked_time(lambda: wl._step(x, y, wl.lrs[0]), lambda: None, min_run_s=1.5, min_blocks=3))

    shares = []
    for _ in range(3):
        before = whole()
        convs = sum(mean_s(blocked_time(s, lambda: None, min_run_s=0.1, min_blocks=5)) for s in steps)
        after = whole()
        shares.append(convs / ((before + after) / 2))
        print(f"convolutions {convs:.3f} s, step {before:.3f} s before and {after:.3f} s after", file=sys.stderr)
    return median(shares)


STANDALONE = {"torch_dropout": ("pytorch", torch_dropout_s), "mindspore_dropout": ("mindspore", mindspore_dropout_s),
              "torch_convolutions": ("pytorch", torch_convolutions_share)}


def standalone(name: str) -> float:
    """One standalone timing in its own process, under the memory allocator the framework's cells get
    (harness.host.allocator: PyTorch's cells preload tcmalloc where the host has it), as the profiled cell ran."""
    framework = STANDALONE[name][0]
    env = {**os.environ, **allocator.process_env(framework),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, __file__, "--standalone", name], capture_output=True, text=True, env=env,
                       cwd=REPO, check=False)
    if p.returncode != 0:
        sys.exit(f"why_crosscheck: the standalone timing {name} failed: {p.stderr.strip().splitlines()[-1:]}")
    return float(p.stdout.strip().splitlines()[-1])


def main(run: str, out: str | None = None) -> int:
    before = os.getloadavg()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    print(f"load average before: {before}")
    rows = []
    for name, (model, framework, mode), category, alone_name, unit in (
            ("GCN dropout, PyTorch eager", ("gcn", "pytorch", "eager"), "dropout/random", "torch_dropout", "ms"),
            ("GCN dropout, MindSpore GRAPH", ("gcn", "mindspore", "graph"), "dropout/random", "mindspore_dropout",
             "ms"),
            ("ResNet50 convolutions' share of a step, PyTorch eager", ("resnet50", "pytorch", "eager"), "convolution",
             "torch_convolutions", "share")):
        prof = profiled(Path(run), model, framework, mode)
        alone = standalone(alone_name)
        if unit == "ms":   # the category's time per step as the report gives it, and the profiler's own self time
            reported, raw, alone = (prof and prof["per_step_s"][category] * 1000, prof and prof["self_s"][category]
                                    * 1000, alone * 1000)
        else:              # the category's share of the profiled step, and of the step timed in the standalone process
            reported, raw = (prof and prof["share"][category], None)
        ratio = reported / alone if reported and alone else None
        ok = ratio is not None and abs(ratio - 1) <= TOLERANCE
        rows.append({"check": name, "unit": unit, "reported": reported, "profiler_self_ms_per_step": raw,
                     "standalone": alone, "ratio": ratio, "within_20_percent": ok})
        extra = f" (the profiler's self time {_f(raw)} ms)" if raw else ""
        print(f"{name}: reported {_f(reported)} {unit}{extra}, standalone {_f(alone)} {unit}, ratio "
              f"{ratio if ratio else float('nan'):.2f}: {'within' if ok else 'NOT within'} 20%")
    after = os.getloadavg()
    print(f"load average after: {after}")
    print(json.dumps(rows))
    if out:
        runs = json.loads(Path(out).read_text()) if Path(out).is_file() else []
        runs.append({"started_at": started,
                     "command": "python benchmarks/why_crosscheck.py RUN --out RUN/why_crosscheck.json",
                     "load_average_before": before, "load_average_after": after, "rows": rows})
        Path(out).write_text(json.dumps(runs, indent=1) + "\n")
    return 0 if all(r["within_20_percent"] for r in rows) else 1


def _f(value: float | None) -> str:
    return f"{value:.3g}" if value else "nan"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--standalone"]:
        print(STANDALONE[sys.argv[2]][1]())
        sys.exit(0)
    args = sys.argv[1:]
    out_file = args[args.index("--out") + 1] if "--out" in args else None
    sys.exit(main(args[0], out_file))
