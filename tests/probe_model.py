"""`python tests/probe_model.py MODEL FRAMEWORK MODE OUT.npz`: build a model from the shared numpy
weights on synthetic data (dropout off, so both frameworks compute the same function), and save its
eval-mode output on the probe batch, the loss of one optimiser step and the loss after it."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import data as datasets  # noqa: E402
from harness import matrix  # noqa: E402
from harness.cell import Cell, model_spec  # noqa: E402
from harness.context import CellContext  # noqa: E402
from harness.frameworks import backend  # noqa: E402
from harness.scenarios.training import model_module  # noqa: E402


def main(model: str, framework: str, mode: str, out: str) -> None:
    m = matrix.load()
    spec = model_spec(m.data["models"][model], "quick")
    spec["hparams"] = {**spec.get("hparams", {}), "dropout": 0.0}
    cell = Cell(id="probe", kind="model", model=model, framework=framework, mode=mode, amp="off", devices=1,
                repeats=1, timeout_s=0, seed=int(m.data["defaults"]["seed"]), spec=spec)
    ctx = CellContext(cell=cell, platform="cpu", repeat=0, data_folder=None, synthetic=True)
    backend(framework).setup(ctx)
    wl = model_module(model, framework).build(ctx, datasets.module(spec["dataset"]).synthetic(cell.seed))
    forward = wl.probe_forward()
    step_loss = wl.probe_step()
    np.savez(out, forward=forward, step_loss=step_loss, loss_after=wl.probe_loss(), after=wl.probe_forward())


if __name__ == "__main__":
    main(*sys.argv[1:5])
