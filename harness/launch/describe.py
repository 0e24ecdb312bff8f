"""`python -m harness.launch.describe FRAMEWORK MATRIX MODEL...`: build each model in one framework (synthetic data,
one fresh process per framework, with that framework's process settings) and print its parameter and layer counts,
a JSON line per model (a model that cannot be built: its error's last line). `python -m harness models` runs it once
per framework: the framework is imported once, not once per model."""

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
    """Every model and inference net x framework of the matrix: each framework's in one process of its own."""
    names = [*m.data.get("models", {}), *m.data.get("inference", {})]
    by_fw: dict[str, dict[str, dict]] = {}
    for fw in m.data["axes"]["framework"]:
        env = {**os.environ, **load_backend(fw).process_env("cpu"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        p = subprocess.run([sys.executable, "-m", "harness.launch.describe", fw, str(m.path), *names],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        by_fw[fw] = {r["model"]: r for r in rows}
        if p.returncode != 0:   # the process itself failed: every model it did not describe gets its last line
            tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
            for name in names:
                by_fw[fw].setdefault(name, _failed(name, fw, tail))
    return [by_fw[fw][name] for name in names for fw in m.data["axes"]["framework"]]


def _failed(model: str, framework: str, error: str) -> dict:
    return {"model": model, "framework": framework, "parameters": None, "layers": None, "error": error}


def main(framework: str, matrix_path: str, models: list[str]) -> None:
    m = matrix.load(matrix_path)
    for model in models:
        try:
            row = describe(model, framework, m)
        except Exception as e:   # noqa: BLE001 - one model that cannot be built does not hide the others' sizes
            row = _failed(model, framework, (str(e).strip().splitlines() or [type(e).__name__])[-1])
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
