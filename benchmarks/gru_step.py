"""Where the GRU training step's time goes, per framework: the target profile's sizes (batch 64, embedding 128,
hidden 256, vocabularies 6000 / 4869), each of the step's parts switched off in turn, at every bucket width.
 The GRU cell's step carries four things a plain seq2seq loop may not: global-norm gradient clipping, a loss that
ignores <pad> targets, the encoder's state gathered at each row's <eos> (not its last position), and length
buckets (a batch is cut to its bucket's width: 10, 14, 18, 22 or 31 tokens). Here the same encoder-decoder
(nn.Embedding + nn.GRU, batch first; a dense layer over the decoder's outputs; Adam, lr 2e-3) is built with each
part on or off, each framework in its own process (MindSpore with the back-end's settings: its mode, thread-to-core
binding), and timed at each width on random tokens:
  first  the first step at that width (MindSpore GRAPH compiles a graph per input shape);
  step   the median of `--steps` steps after two warm-up steps, each read back (the loss) before the clock.
Variants: harness (all four parts), no-clip, no-mask, no-gather, plain (none of them). MindSpore also tries its
documented way to avoid one graph per width, a dynamic sequence axis (`Cell.set_inputs` with None), and prints what
it says. The load average is printed before and after: a figure taken with anything else running is not evidence.

    python benchmarks/gru_step.py [--frameworks pytorch,mindspore] [--modes graph] [--steps 12]
        [--variants harness,no-clip,no-mask,no-gather,plain] [--widths 10,14,18,22,31]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import loadavg  # noqa: E402

B, E, H, SRC_VOCAB, TGT_VOCAB, PAD = 64, 128, 256, 6000, 4869, 0
VARIANTS = {"harness": dict(clip=True, mask=True, gather=True), "no-clip": dict(clip=False, mask=True, gather=True),
            "no-mask": dict(clip=True, mask=False, gather=True), "no-gather": dict(clip=True, mask=True, gather=False),
            "plain": dict(clip=False, mask=False, gather=False)}


def batches(widths, seed=0):
    """Random token batches (src, last, tgt_in, tgt_out) per width, the same in both frameworks; about one target
    token in five is <pad>, as in Multi30K's bucketed batches."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for t in widths:
        tgt_out = rng.integers(4, TGT_VOCAB, (B, t)).astype(np.int32)
        tgt_out[rng.random((B, t)) < 0.2] = PAD
        out[t] = (rng.integers(4, SRC_VOCAB, (B, t)).astype(np.int32), rng.integers(t // 2, t, B).astype(np.int32),
                  rng.integers(4, TGT_VOCAB, (B, t)).astype(np.int32), tgt_out)
    return out


def time_widths(step, data, steps) -> dict:
    res = {}
    for t, arrays in data.items():
        t0 = time.perf_counter()
        step(arrays)
        first = time.perf_counter() - t0
        step(arrays)
        samples = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step(arrays)  # returns after the loss is read back
            samples.append(time.perf_counter() - t0)
        res[t] = {"first_s": first, "step_ms": 1000 * median(samples)}
    return res


def pytorch_child(variant: dict, widths, steps) -> dict:
    import torch
    from torch import nn


    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc_emb, self.dec_emb = nn.Embedding(SRC_VOCAB, E), nn.Embedding(TGT_VOCAB, E)
            self.enc, self.dec = nn.GRU(E, H, batch_first=True), nn.GRU(E, H, batch_first=True)
            self.out = nn.Linear(H, TGT_VOCAB)

        def forward(self, src, last, tgt_in):
            o, h = self.enc(self.enc_emb(src))
            if variant["gather"]:
                h = o[torch.arange(src.shape[0]), last].unsqueeze(0)
            return self.out(self.dec(self.dec_emb(tgt_in), h)[0])

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)

    def step(arrays):
        src, last, tgt_in, tgt_out = (torch.from_numpy(a).long() for a in arrays)
        opt.zero_grad(set_to_none=True)
        logits = net(src, last, tgt_in)
        loss = nn.functional.cross_entropy(logits.reshape(-1, TGT_VOCAB), tgt_out.reshape(-1),
                                           ignore_index=PAD if variant["mask"] else -100)
        loss.backward()
        if variant["clip"]:
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss.item()

    return time_widths(step, batches(widths), steps)


def mindspore_child(variant: dict, widths, steps, mode: str, dynamic: bool = False) -> dict:
    import mindspore as ms
    from mindspore import Tensor, nn, ops

    from harness.models.gru.reference_mindspore import _scale, _sq_sum

    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    ms.runtime.set_cpu_affinity(True)  # as the back-end does for a single-process cell

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.enc_emb, self.dec_emb = nn.Embedding(SRC_VOCAB, E), nn.Embedding(TGT_VOCAB, E)
            self.enc, self.dec = nn.GRU(E, H, batch_first=True), nn.GRU(E, H, batch_first=True)
            self.out = nn.Dense(H, TGT_VOCAB)

        def construct(self, src, last, tgt_in):
            o, h = self.enc(self.enc_emb(src))
            if variant["gather"]:
                rows = ops.arange(src.shape[0], dtype=ms.int32)
                h = ops.expand_dims(ops.gather_nd(o, ops.stack((rows, last), 1)), 0)
            return self.out(self.dec(self.dec_emb(tgt_in), h)[0])

    class Loss(nn.Cell):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def construct(self, src, last, tgt_in, tgt_out):
            logits = self.net(src, last, tgt_in)
            logits, tgt_out = logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1)
            if variant["mask"]:
                return ops.cross_entropy(logits, tgt_out, ignore_index=PAD)
            return ops.cross_entropy(logits, tgt_out)

    class Step(nn.TrainOneStepCell):
        def __init__(self, network, optimizer):
            super().__init__(network, optimizer)
            self.hyper_map = ops.HyperMap()

        def construct(self, *inputs):
            loss = self.network(*inputs)
            grads = self.grad(self.network, self.weights)(*inputs, ops.fill(loss.dtype, loss.shape, self.sens))
            if variant["clip"]:
                norm = ops.sqrt(ops.addn(self.hyper_map(_sq_sum, grads)))
                grads = self.hyper_map(ops.partial(_scale, ops.clamp(1.0 / (norm + 1e-6), max=1.0)), grads)
            return ops.depend(loss, self.optimizer(grads))

    net = Net()
    train = Step(Loss(net), nn.Adam(net.trainable_params(), learning_rate=2e-3))
    train.set_train()
    if dynamic:
        seq = Tensor(shape=[B, None], dtype=ms.int32)
        train.set_inputs(seq, Tensor(shape=[B], dtype=ms.int32), seq, seq)

    def step(arrays):
        return float(train(*(Tensor(a) for a in arrays)).asnumpy())

    return time_widths(step, batches(widths), steps)


def child(args) -> dict:
    variant = VARIANTS.get(args.variant, VARIANTS["harness"])
    widths = [int(w) for w in args.widths.split(",")]
    if args.framework == "pytorch":
        return pytorch_child(variant, widths, args.steps)
    try:
        return mindspore_child(variant, widths, args.steps, args.mode, dynamic=args.variant == "dynamic")
    except (ValueError, RuntimeError, TypeError) as e:
        if args.variant != "dynamic":
            raise
        return {"error": str(e).strip().splitlines()[0][:300]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", default="pytorch,mindspore")
    p.add_argument("--modes", default="graph", help="MindSpore modes")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--widths", default="10,14,18,22,31")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--out", type=Path)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--framework", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a)))
        return 0
    from harness.frameworks import backend

    print(f"load average before: {loadavg()}  (1, 5, 15 min; {os.cpu_count()} cores)", flush=True)
    rows = []
    jobs = [(fw, "eager" if fw == "pytorch" else m, v) for fw in a.frameworks.split(",")
            for m in (a.modes.split(",") if fw == "mindspore" else ["eager"]) for v in a.variants.split(",")]
    if "mindspore" in a.frameworks and "graph" in a.modes:
        jobs.append(("mindspore", "graph", "dynamic"))
    for fw, mode, variant in jobs:
        env = {**os.environ, **backend(fw).process_env("cpu"), "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, __file__, "--child", "--framework", fw, "--mode", mode, "--variant",
                               variant, "--widths", a.widths, "--steps", str(a.steps)], capture_output=True,
                              text=True, env=env)
        if proc.returncode != 0:
            print(f"{fw} {mode} {variant}: failed: {proc.stderr.strip()[-400:]}", flush=True)
            continue
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append({"framework": fw, "mode": mode, "variant": variant, "widths": res})
        head = f"{fw:<9} {mode:<8} {variant:<9}"
        if "error" in res:
            print(f"{head} {res['error']}", flush=True)
            continue
        print(head + " | ".join(f"T{t}: first {r['first_s']:4.1f} s, step {r['step_ms']:5.0f} ms "
                                f"({B / r['step_ms'] * 1000:4.0f}/s)" for t, r in res.items()), flush=True)
    print(f"load average after: {loadavg()}", flush=True)
    if a.out:
        a.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
