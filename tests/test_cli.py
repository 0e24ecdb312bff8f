"""Bad input never shows a traceback: one line naming the thing and the fix, exit code 2."""

import shutil

import pytest

from harness.data import cora
from tests.conftest import REPO, harness


def _one_line_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    for n in needles:
        assert n in last, last
    return last


def test_unknown_platform():
    _one_line_error(harness("run", "--platform", "tpu", "--out", "x"), "invalid choice: 'tpu'")


def test_unknown_profile(tmp_path):
    _one_line_error(harness("run", "--platform", "cpu", "--profile", "huge", "--out", tmp_path / "o", "--synthetic"),
                    "unknown profile 'huge'", "quick")


def test_only_matching_nothing(tmp_path):
    p = harness("run", "--platform", "cpu", "--out", tmp_path / "o", "--synthetic", "--only", "model/vgg/*")
    _one_line_error(p, "matches no cell")


def test_data_dir_missing_a_file(tmp_path):
    (tmp_path / "data" / cora.FOLDER).mkdir(parents=True)
    _one_line_error(harness("run", "--platform", "cpu", "--out", tmp_path / "o", "--data-dir", tmp_path / "data",
                            "--only", "model/gcn/*"), "ind.cora.x is missing")
    assert not (tmp_path / "o").exists(), "a refused run leaves no folder behind to block the corrected one"


def test_synthetic_names_an_unknown_dataset(tmp_path):
    _one_line_error(harness("run", "--platform", "cpu", "--out", tmp_path / "o", "--synthetic", "imagenet"),
                    "dataset 'imagenet'")


def test_data_file_with_a_wrong_hash(tmp_path, shared_data):
    shutil.copytree(shared_data / cora.FOLDER, tmp_path / "data" / cora.FOLDER)
    (tmp_path / "data" / cora.FOLDER / "ind.cora.y").write_bytes(b"not a pickle")
    _one_line_error(harness("run", "--platform", "cpu", "--out", tmp_path / "o", "--data-dir", tmp_path / "data",
                            "--only", "model/gcn/*"), "ind.cora.y", "wrong sha256", cora.FILES["ind.cora.y"])


def test_results_on_a_folder_that_is_not_a_run(tmp_path):
    _one_line_error(harness("results", tmp_path, "--json"), "is not a run folder")


def test_report_on_a_folder_that_is_not_a_run(tmp_path):
    _one_line_error(harness("report", tmp_path), "is not a run folder")


def test_accelerator_platform_without_devices(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi")
    _one_line_error(harness("run", "--platform", "cuda", "--out", tmp_path / "o", "--synthetic"),
                    "no NVIDIA GPU visible")


def test_bad_matrix_file(tmp_path):
    (tmp_path / "m.toml").write_text("[profiles.quick\n")
    _one_line_error(harness("list", "--matrix", tmp_path / "m.toml"), "not valid TOML")


def test_list_prints_the_cells():
    p = harness("list", "--profile", "quick", "--only", "model/gcn/*/amp-off/*")
    assert p.returncode == 0 and p.stdout.split() == ["model/gcn/pytorch/eager/amp-off/1dev", "x2",
                                                      "model/gcn/mindspore/graph/amp-off/1dev", "x2",
                                                      "model/gcn/mindspore/pynative/amp-off/1dev", "x2"]
    assert "6 repeats in all" in p.stderr
    p = harness("list", "--profile", "quick", "--only", "model/gcn/*/amp-O3/*,operator/linear/*", "--repeats", "4")
    assert p.returncode == 0 and set(p.stdout.split()[1::2]) == {"x4"}


@pytest.mark.parametrize("args", [[], ["tpu"], ["--quick"]])
def test_reproduce_sh_without_a_known_platform_exits_2(args):
    """No platform at all: the usage; a wrong one: one line (tests/test_bad_input.py)."""
    import subprocess

    p = subprocess.run([str(REPO / "reproduce.sh"), *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert ("usage: ./reproduce.sh" in p.stderr) == (not args)


def test_offline_without_cifar10_names_the_file_and_synthetic(tmp_path):
    """No network (a proxy that refuses) and no CIFAR-10 files: one line that names the file, and --synthetic
    cifar10 as the way to run without it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--platform", "cpu", "--out", str(tmp_path / "o"),
                        "--data-dir", str(tmp_path / "data"), "--download", "--only", "model/resnet50/*"],
                       capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    _one_line_error(p, "could not download", "cifar-10", "--synthetic cifar10")
    assert not (tmp_path / "o").exists()
