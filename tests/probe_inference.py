"""`python tests/probe_inference.py NET FRAMEWORK MODE OUT.npz`: build an inference net from the shared numpy weights
and save its fp32 eval-mode logits on two synthetic images, and its parameter and layer counts."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import matrix  # noqa: E402
from harness.config.cell import Cell  # noqa: E402
from harness.config.spec import InferenceSpec  # noqa: E402
from harness.launch.inprocess import set_up  # noqa: E402
from harness.scenarios.inference import nets as inference


def main(name: str, framework: str, mode: str, out: str) -> None:
    seed = int(matrix.load().data["defaults"]["seed"])
    cell = Cell(id="probe", kind="inference", model=name, framework=framework, mode=mode, amp="off",
                devices=1, repeats=1, timeout_s=0, seed=seed, spec=InferenceSpec(net=name, batch=2))
    s = set_up(cell, until="backend")
    ctx, be = s.ctx, s.backend
    impl = inference.module(framework)
    weights = inference.weights(name, seed)
    forward = impl.forward(ctx, name, weights, inference.images(name, seed, 2))
    net = impl.network(name, weights)
    np.savez(out, forward=forward, parameters=be.parameter_count(net), layers=be.layer_count(net))


if __name__ == "__main__":
    main(*sys.argv[1:5])
