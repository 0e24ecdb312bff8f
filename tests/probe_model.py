"""`python tests/probe_model.py MODEL FRAMEWORK MODE OUT.npz`: build a model from the shared numpy
weights on synthetic data (dropout off, so both frameworks compute the same function), and save its
eval-mode output on the probe batch, the loss of one optimiser step and the loss after it."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import matrix  # noqa: E402
from harness.config.cell import Cell  # noqa: E402
from harness.config.spec import model_spec  # noqa: E402
from harness.launch.inprocess import set_up  # noqa: E402


def main(model: str, framework: str, mode: str, out: str) -> None:
    m = matrix.load()
    spec = model_spec(m.data["models"][model], "quick")
    spec = replace(spec, hparams={**spec.hparams, "dropout": 0.0})
    cell = Cell(id="probe", kind="model", model=model, framework=framework, mode=mode, amp="off", devices=1,
                repeats=1, timeout_s=0, seed=int(m.data["defaults"]["seed"]), spec=spec)
    wl = set_up(cell).workload
    forward = wl.probe_forward()
    step_loss = wl.probe_step()
    np.savez(out, forward=forward, step_loss=step_loss, loss_after=wl.probe_loss(), after=wl.probe_forward())


if __name__ == "__main__":
    main(*sys.argv[1:5])
