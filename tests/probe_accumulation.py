"""`python tests/probe_accumulation.py MODEL FRAMEWORK MODE STEPS OUT.npz`: a small BERT (the quick profile's, one
layer, dropout off) on synthetic data, trained one epoch of two optimiser steps with each batch in STEPS micro-batches
(gradient accumulation); saves the parameters before and after, the epoch's mean loss and, in PyTorch, the last
step's gradients."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import matrix  # noqa: E402
from harness.config.cell import Cell  # noqa: E402
from harness.config.spec import model_spec  # noqa: E402
from harness.launch.inprocess import set_up  # noqa: E402

# Small enough for seconds a step on one core; lr 1e-3 so that a step moves the weights well above fp32's rounding.
SMALL = {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "dropout": 0.0, "lr": 1e-3, "warmup_steps": 1}


def main(model: str, framework: str, mode: str, steps: str, out: str) -> None:
    m = matrix.load()
    spec = model_spec(m.data["models"][model], "quick")
    spec = replace(spec, epochs=1, train_samples=2 * int(spec.hparams["batch"]), hparams={**spec.hparams, **SMALL})
    cell = Cell(id="probe", kind="model", model=model, framework=framework, mode=mode, amp="off", devices=1,
                repeats=1, timeout_s=0, seed=int(m.data["defaults"]["seed"]), spec=spec)
    wl = set_up(cell, accumulation_steps=int(steps)).workload
    before = [a.copy() for a in wl.state_arrays()]
    loss = wl.train_epoch()
    grads = [p.grad.numpy() for p in wl.net.parameters()] if framework == "pytorch" else []
    np.savez(out, *before, *wl.state_arrays(), *grads, loss=loss, n=len(before))


if __name__ == "__main__":
    main(*sys.argv[1:6])
