"""The profiled pass against timings that do not come from a profiler (harness.profiling):

    python benchmarks/why_crosscheck.py RUN_FOLDER

1. GCN on Cora: the profile's dropout/random time per step (one step an epoch: full batch) against the same dropout
   calls timed standalone in each framework: PyTorch's F.dropout, MindSpore's nn.Dropout compiled in GRAPH mode, on
   the two shapes the GCN drops (the 2708 x 1433 input features and the 2708 x 16 hidden layer), in training mode.
2. ResNet50 (quick batch): the profile's convolution time per step against its 53 convolutions timed standalone in
   PyTorch, each at the input shape it sees in the model (forward hooks), forward and backward (input and weight
   gradients; the first convolution's input needs none).

Both use harness.operators.blocked_time (warm-up, blocks until the clock is negligible, median over blocks), each in
its own process under the memory allocator the framework's cells get. The profile's figure is the one the report
gives (its share of the profiled step times the measured step); the profiler's own self time is printed beside it.
MindSpore's dropout is timed with the output's first element read back, not the whole 15 MB. It prints each pair,
their ratio and whether it is within 20%, with the load average before and after: run it with nothing else on the
machine. Exit code 1 where a pair is not within 20%.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import allocator  # noqa: E402
from harness.operators import blocked_time  # noqa: E402
from harness.store import RunStore  # noqa: E402

TOLERANCE = 0.20
GCN_SHAPES = ((2708, 1433), (2708, 16))


def profiled(run: Path, model: str, framework: str, mode: str, category: str) -> tuple[float, float] | None:
    """(the category's time per step as the report gives it, the profiler's own self time per step)."""
    for r in RunStore(run).results():
        if (r.get("status"), r["model"], r["framework"], r["mode"], r["amp"]) == ("ok", model, framework, mode, "off") \
                and (r.get("profile") or {}).get("per_step_s"):
            return r["profile"]["per_step_s"][category], r["profile"]["self_s"][category]
    return None


def torch_dropout_s() -> float:
    import torch
    import torch.nn.functional as F

    xs = [torch.rand(*s) for s in GCN_SHAPES]
    return sum(blocked_time(lambda x=x: F.dropout(x, 0.5, True), lambda: None)["median_s"] for x in xs)


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
        total += blocked_time(lambda d=drop, x=x: d(x).asnumpy(), lambda: None)["median_s"]
    return total


def torch_convolutions_s() -> float:
    import torch
    from torch import nn

    from harness import matrix
    from harness.cell import Cell
    from harness.inprocess import set_up
    from harness.spec import model_spec

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
        wl.net(torch.rand(spec.hparams["batch"], 3, 32, 32))
    for h in hooks:
        h.remove()
    total = 0.0
    for i, (conv, shape) in enumerate(shapes):
        x = torch.rand(*shape, requires_grad=i > 0)
        grad = torch.rand_like(conv(x))

        def step(conv=conv, x=x, grad=grad):
            conv.zero_grad(set_to_none=True)
            conv(x).backward(grad)

        total += blocked_time(step, lambda: None, min_run_s=0.3, min_blocks=5)["median_s"]
    return total


STANDALONE = {"torch_dropout": ("pytorch", torch_dropout_s), "mindspore_dropout": ("mindspore", mindspore_dropout_s),
              "torch_convolutions": ("pytorch", torch_convolutions_s)}


def standalone(name: str) -> float:
    """One standalone timing in its own process, under the memory allocator the framework's cells get
    (harness.allocator: PyTorch's cells preload tcmalloc where the host has it), as the profiled cell ran."""
    framework = STANDALONE[name][0]
    env = {**os.environ, **allocator.process_env(framework),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, __file__, "--standalone", name], capture_output=True, text=True, env=env,
                       cwd=REPO, check=False)
    if p.returncode != 0:
        sys.exit(f"why_crosscheck: the standalone timing {name} failed: {p.stderr.strip().splitlines()[-1:]}")
    return float(p.stdout.strip().splitlines()[-1])


def main(run: str) -> int:
    print(f"load average before: {os.getloadavg()}")
    rows = []
    for name, prof, alone_name in (
            ("GCN dropout, PyTorch eager", profiled(Path(run), "gcn", "pytorch", "eager", "dropout/random"),
             "torch_dropout"),
            ("GCN dropout, MindSpore GRAPH", profiled(Path(run), "gcn", "mindspore", "graph", "dropout/random"),
             "mindspore_dropout"),
            ("ResNet50 convolutions, PyTorch eager",
             profiled(Path(run), "resnet50", "pytorch", "eager", "convolution"), "torch_convolutions")):
        alone = standalone(alone_name)
        reported, raw = prof if prof else (None, None)
        ratio = reported / alone if reported and alone else None
        ok = ratio is not None and abs(ratio - 1) <= TOLERANCE
        rows.append({"check": name, "reported_ms_per_step": reported and reported * 1000,
                     "profiler_self_ms_per_step": raw and raw * 1000, "standalone_ms": alone * 1000,
                     "ratio": ratio, "within_20_percent": ok})
        print(f"{name}: reported {_f(reported)} ms a step (the profiler's self time {_f(raw)} ms), standalone "
              f"{alone * 1000:.2f} ms, ratio {ratio if ratio else float('nan'):.2f}: "
              f"{'within' if ok else 'NOT within'} 20%")
    print(f"load average after: {os.getloadavg()}")
    print(json.dumps(rows))
    return 0 if all(r["within_20_percent"] for r in rows) else 1


def _f(seconds: float | None) -> str:
    return f"{seconds * 1000:.2f}" if seconds else "nan"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--standalone"]:
        print(STANDALONE[sys.argv[2]][1]())
        sys.exit(0)
    sys.exit(main(sys.argv[1]))
