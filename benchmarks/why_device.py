"""The profiled pass's device figures against timings that use no profiler (harness.profiling.device):

    python benchmarks/why_device.py --platform cuda --out FILE [--steps 20]

For ResNet50 (the harness's network, synthetic CIFAR-10 images of 32 x 32) and a GRU encoder-decoder (synthetic
Multi30K-shaped token batches: no data folder is read), both at the paper's batch of 128, fp32, eager:
- each step timed by torch.cuda.Event pairs around it (the device's own clock, no profiler), and by the host's clock
  with the device synchronised;
- the same steps under the windowed profiler of the profiled pass (harness.frameworks.pytorch.profile_ops with a
  window), giving the device's busy time per step (the union of its kernels' intervals) and the profiled step.
It writes, per model: the event-timed step, the wall step, the profiled step, the busy time, busy / event step, and
the pass's own cost in seconds. Busy time can only be at most the event-timed step; where they are close the device
is the bound, where busy is far below it the step waits for the host.

On `--platform cpu` there is no device timeline: it runs the same models (smaller batch) and compares the windowed
profiler's step with the unprofiled wall step, saying that the busy-time comparison needs a device.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import types
from pathlib import Path
from statistics import fmean

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def models(torch, batch: int, dev):
    from harness.models.resnet50.pytorch import ResNet50

    nn = torch.nn
    net = ResNet50(10, 0.1, 1e-5).to(dev)
    x, y = torch.randn(batch, 3, 32, 32, device=dev), torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def resnet_step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    class Seq2Seq(nn.Module):   # Multi30K-shaped: 6k-token vocabularies, embedding 256, hidden 512, length 30
        def __init__(self):
            super().__init__()
            self.src, self.tgt = nn.Embedding(6000, 256), nn.Embedding(6000, 256)
            self.enc, self.dec = nn.GRU(256, 512, batch_first=True), nn.GRU(256, 512, batch_first=True)
            self.out = nn.Linear(512, 6000)

        def forward(self, s, t):
            _, h = self.enc(self.src(s))
            o, _ = self.dec(self.tgt(t), h)
            return self.out(o)

    gru = Seq2Seq().to(dev)
    s, t = torch.randint(0, 6000, (batch, 30), device=dev), torch.randint(0, 6000, (batch, 30), device=dev)
    gopt = torch.optim.Adam(gru.parameters(), lr=1e-3)

    def gru_step():
        gopt.zero_grad(set_to_none=True)
        logits = gru(s, t[:, :-1])
        nn.functional.cross_entropy(logits.reshape(-1, 6000), t[:, 1:].reshape(-1)).backward()
        gopt.step()

    return {"resnet50": resnet_step, "gru": gru_step}


def measure(torch, platform: str, name: str, step, steps: int) -> dict:
    from harness import profiling
    from harness.frameworks import pytorch as pt
    from harness.profiling import device

    ctx = types.SimpleNamespace(platform=platform)

    def sync():
        pt.synchronize(ctx)

    for _ in range(3):
        step()
    sync()
    row: dict = {"model": name, "steps": steps}
    if platform == "cuda":
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps)]
        t = time.perf_counter()
        for a, b in pairs:
            a.record()
            step()
            b.record()
        sync()
        row["wall_step_s"] = (time.perf_counter() - t) / steps
        row["event_step_s"] = fmean(a.elapsed_time(b) / 1000 for a, b in pairs)
    else:
        t = time.perf_counter()
        for _ in range(steps):
            step()
        row["wall_step_s"] = (time.perf_counter() - t) / steps
    window = {"warmup": 1, "active": steps, "count_flops": True}
    t = time.perf_counter()
    pt.profile_ops(ctx, lambda: [step() for _ in range(steps + 2)], tempfile.mkdtemp(), window=window)
    row["pass_s"] = time.perf_counter() - t
    row["profiled_step_s"] = window["window_s"] / window["steps"] if window.get("steps") else None
    row["flops_per_step"] = window.get("flops_per_step")
    block = device.timeline(window.get("kernels") or [], window.get("steps") or steps, window.get("window_s"),
                            "torch.profiler", category=profiling.kernel_category)
    if block:
        row["busy_s"], row["busy_share_of_profiled_step"] = block["busy_s"], block["busy_share"]
        row["busy_over_event_step"] = block["busy_s"] / row["event_step_s"]
        row["by_category_s"] = block["by_category_s"]
    else:
        row["note"] = "no device timeline on this platform: the busy-time comparison needs a GPU"
    row["profiled_over_wall_step"] = row["profiled_step_s"] / row["wall_step_s"] if row["profiled_step_s"] else None
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--platform", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=None, help="default 128 on cuda (the paper's), 8 on cpu")
    a = p.parse_args(argv)
    import torch

    if a.platform == "cuda":
        torch.backends.cudnn.benchmark = True   # as the harness's CUDA cells set it
    dev = torch.device("cuda" if a.platform == "cuda" else "cpu")
    batch = a.batch or (128 if a.platform == "cuda" else 8)
    steps = a.steps if a.platform == "cuda" else min(a.steps, 3)
    t0 = time.perf_counter()
    rows = [measure(torch, a.platform, name, step, steps) for name, step in models(torch, batch, dev).items()]
    out = {"platform": a.platform, "batch": batch, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0) if a.platform == "cuda" else "cpu",
           "seconds": time.perf_counter() - t0, "rows": rows}
    Path(a.out).write_text(json.dumps(out, indent=1))
    for r in rows:
        print(json.dumps({k: v for k, v in r.items() if k != "by_category_s"}))
    if a.platform == "cpu":
        print("cpu: no device timeline; compared the windowed profiler's step with the unprofiled one only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
