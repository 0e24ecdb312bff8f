"""The inference scenario (S1 Table 4, S2): cells, the ImageNet-shape ResNet-50 in both frameworks, a measured cell."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness.config import matrix
from harness.frameworks import backend
from harness.scenarios.inference import nets as inference
from tests.helpers import REPO, harness


def test_quick_profile_has_small_inference_cells_and_the_full_axes_expand():
    m = matrix.load()
    quick = [c for c in m.expand("quick") if c.kind == "inference"]
    assert {c.id for c in quick} == {"inference/resnet50_imagenet/pytorch/eager/amp-off/batch2",
                                     "inference/resnet50_imagenet/mindspore/graph/amp-off/batch2"}
    full = [c for c in m.expand("companion") if c.kind == "inference"]
    batches = {c.spec.batch for c in full}
    assert batches == set(m.data["inference"]["resnet50_imagenet"]["batches"]) and len(batches) >= 3
    assert {c.amp for c in full} >= {"off", "O2"}  # fp32 and mixed precision
    assert not any(c.framework == "pytorch" and c.amp == "O3" for c in full)  # the matrix's exclude rules apply


def _probe(tmp_path, framework, mode):
    out = tmp_path / f"{framework}-{mode}.npz"
    env = {**os.environ, **backend(framework).process_env("cpu"), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, str(REPO / "tests" / "probe_inference.py"), "resnet50_imagenet", framework,
                        mode, out], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return np.load(out)


def test_resnet50_imagenet_same_size_and_same_logits_in_both_frameworks(tmp_path):
    pt = _probe(tmp_path, "pytorch", "eager")
    ms = _probe(tmp_path, "mindspore", "pynative")
    want = inference.NETS["resnet50_imagenet"]["parameters"]
    assert int(pt["parameters"]) == int(ms["parameters"]) == want == 25_557_032  # torchvision's resnet50
    assert int(pt["layers"]) == int(ms["layers"]) == 107  # 53 conv, 53 BN, 1 dense
    assert pt["forward"].shape == ms["forward"].shape == (2, 1000)
    rel = np.max(np.abs(ms["forward"] - pt["forward"])) / np.max(np.abs(pt["forward"]))
    assert rel <= 1e-4, rel


def test_an_inference_cell_measures_images_per_second(tmp_path):
    out = tmp_path / "run"
    p = harness("run", "--profile", "quick", "--platform", "cpu", "--synthetic", "--out", out,
                "--only", "inference/resnet50_imagenet/pytorch/*")
    assert p.returncode == 0, p.stdout + p.stderr
    [path] = out.glob("**/r0.json")
    r = json.loads(path.read_text())
    assert r["status"] == "ok" and r["kind"] == "inference" and r["throughput_unit"] == "images/s"
    assert r["parameters"] == 25_557_032 and r["batch"] == 2 and r["blocks"] >= 7
    assert r["throughput"] == pytest.approx(2 / r["median_s"]) and r["iqr_s"] >= 0
