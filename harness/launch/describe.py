"""`python -m harness.launch.describe MODEL FRAMEWORK`: build a model (synthetic data, fresh process) and
print its parameter and layer counts as JSON. `python -m harness models` calls it per framework."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.config import cellid, matrix
from harness.config.cell import Cell
from harness.config.spec import InferenceSpec, model_spec
from harness.frameworks import backend as load_backend
from harness.launch.inprocess import set_up
from harness.paths import REPO

# The mode used to build: the cheapest one each framework has (the counts do not depend on it).
BUILD_MODE = {"pytorch": "eager", "mindspore": "pynative"}


def describe(model: str, framework: str, m: matrix.Matrix | None = None) -> dict:
    m = m or matrix.load()
    if model not in m.data.get("models", {}) and model in m.data.get("inference", {}):
        return _describe_inference(model, framework, m)
    spec = model_spec(m.data["models"][model], "quick")
    cell = Cell(id=cellid.describe_id(model, framework), kind="model", model=model, framework=framework,
                mode=BUILD_MODE[framework], amp="off", devices=1, repeats=1, timeout_s=0,
                seed=int(m.data.get("defaults", {}).get("seed", 0)), spec=spec)
    s = set_up(cell)
    # `net`: the workload's fp32 network (AMP is off here); the back-end counts it the same way for every model.
    return {"model": model, "framework": framework, "parameters": s.backend.parameter_count(s.workload.net),
            "layers": s.backend.layer_count(s.workload.net)}


def _describe_inference(name: str, framework: str, m: matrix.Matrix) -> dict:
    """An inference net ([inference.NAME]): built from its shared numpy weights, counted by the back-end."""
    from harness.scenarios.inference import nets as inference

    cell = Cell(id=cellid.describe_id(name, framework), kind="inference", model=name, framework=framework,
                mode=BUILD_MODE[framework], amp="off", devices=1, repeats=1, timeout_s=0,
                seed=int(m.data.get("defaults", {}).get("seed", 0)),
                spec=InferenceSpec(net=name, batch=1))  # the batch is not read: the network alone is built
    backend = set_up(cell, until="backend").backend
    net = inference.module(framework).network(name, inference.weights(name, cell.seed))
    return {"model": name, "framework": framework, "parameters": backend.parameter_count(net),
            "layers": backend.layer_count(net)}


def describe_all(m: matrix.Matrix) -> list[dict]:
    """Every model and inference net x framework of the matrix, each built in its own process."""
    out = []
    for model in [*m.data.get("models", {}), *m.data.get("inference", {})]:
        for fw in m.data["axes"]["framework"]:
            env = {**os.environ, **load_backend(fw).process_env("cpu"),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
            p = subprocess.run([sys.executable, "-m", "harness.launch.describe", model, fw, str(m.path)],
                               capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
            if p.returncode != 0:
                tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
                out.append({"model": model, "framework": fw, "parameters": None, "layers": None, "error": tail})
            else:
                out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return out


if __name__ == "__main__":
    print(json.dumps(describe(sys.argv[1], sys.argv[2], matrix.load(sys.argv[3] if len(sys.argv) > 3 else None))))
