"""What the CUDA image does for MindSpore's own GPU environment check and for the first run on a GPU its kernels have
no machine code for, pinned without building the image: the file names Dockerfile.cuda gives the CUDA 11 libraries
against the locks, MindSpore 2.10's own check run on that layout, the per-framework architecture labels and the PTX
JIT cache. The built image is checked the same way by tools/check_cuda_image.sh (tools/check_image.sh --cuda)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO, dockerfile_arg, dockerfile_env, lock

DOCKERFILE = (REPO / "Dockerfile.cuda").read_text()


def _labels() -> dict[str, str]:
    block = DOCKERFILE.split("\nLABEL ", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r'([\w.-]+)="([^"]*)"', block))


def test_library_file_names_follow_the_locked_cuda11_versions():
    """MindSpore's check reads the CUDA version from libcudart.so.X.Y.Z (and cuDNN's from libcudnn.so.X.Y.Z), names
    the wheels do not ship: the image makes them from build ARGs, which must be the locked versions (a lock bump
    that forgets the ARG fails here, and the build's own version check fails too)."""
    pins = lock("cuda11-libs.txt")
    assert dockerfile_arg("Dockerfile.cuda", "CUDART_CU11_VERSION") == pins["nvidia-cuda-runtime-cu11"][0]
    assert dockerfile_arg("Dockerfile.cuda", "CUDNN_CU11_VERSION") == pins["nvidia-cudnn-cu11"][0]
    text = DOCKERFILE.replace("\\\n", " ")
    assert 'ln -s libcudart.so.11.0 "/opt/cuda11/toolkit/lib64/libcudart.so.${CUDART_CU11_VERSION}"' in text
    assert 'ln -s libcudnn.so.8 "/opt/cuda11/toolkit/lib64/libcudnn.so.${CUDNN_CU11_VERSION%.*}"' in text
    # The check names the plug-in folder gpu<major.minor of cudart>; the folder of the plug-in MindSpore's loader
    # takes for CUDA 11.8 is gpu11.6.
    assert 'ln -s "gpu${MINDSPORE_CUDA}" "$plugin/gpu${CUDART_CU11_VERSION%.*}"' in text
    assert dockerfile_arg("Dockerfile.cuda", "MINDSPORE_CUDA") == "11.6"
    # The build checks the installed cudart against the ARG.
    assert '"$CUDNN_CU11_VERSION" "$CUDART_CU11_VERSION"' in text and '"nvidia-cuda-runtime-cu11"' in text


def test_labels_say_per_framework_which_architectures_have_machine_code_and_which_go_through_ptx():
    labels = _labels()
    assert "io.ms-pt-harness.gpu_arch" not in labels, "one label for both frameworks hid MindSpore's PTX-only sm_90"
    torch, mindspore = labels["io.ms-pt-harness.gpu_arch.torch"], labels["io.ms-pt-harness.gpu_arch.mindspore"]
    # Read from torch 2.7.1's and MindSpore 2.10.0's wheels (tools/fatbin_archs.py), asserted again in the built image.
    assert torch.startswith("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90 machine code") and "no PTX" in torch
    assert mindspore.startswith("sm_60 sm_61 sm_70 sm_75 sm_80 machine code; compute_60 compute_86 PTX")
    assert "sm_90" not in mindspore.split(" machine code")[0] and "JIT" in mindspore
    assert "JIT" in labels["org.opencontainers.image.description"]


def test_ptx_jit_cache_is_a_kept_folder_any_uid_can_write_within_cudas_limit():
    env = dockerfile_env("Dockerfile.cuda")
    assert env["CUDA_CACHE_PATH"] == "/cache/cuda-jit" == _labels()["io.ms-pt-harness.cuda_jit_cache"]
    # 4 GiB: the largest CUDA_CACHE_MAXSIZE the CUDA Programming Guide's environment variable table allows.
    assert int(env["CUDA_CACHE_MAXSIZE"]) == 4294967296
    assert "install -d -m 1777 /cache/cuda-jit" in DOCKERFILE, "the container runs as the caller's uid"
    assert not re.search(r"^VOLUME .*/cache", DOCKERFILE, re.M), "reproduce.sh mounts a kept host folder there"


CHECK = """
import os, sys
from mindspore.run_check import _check_version
plugin = sys.argv[1]
_check_version.set_env("GPU", plugin)
first = os.environ["LD_LIBRARY_PATH"].split(":")[0]
print("VERSION", _check_version.GPUEnvChecker(plugin).get_cudart_version())
print("FOLDER", os.path.basename(first), os.path.isdir(first), os.path.basename(os.path.realpath(first)))
"""


def _mindspore_check(tmp_path, cudart_names: list[str]) -> tuple[str, str]:
    """MindSpore 2.10's own GPU environment check (the callback it runs once its GPU plug-in is loaded) on the image's
    layout: a plug-in folder with gpu11.6 and the gpu11.8 -> gpu11.6 link, and a lib64 holding libcudart under the
    given names (the soname is a copy of any shared library: ldd only has to resolve it)."""
    import mindspore

    plugin_dir = tmp_path / "plugin"
    (plugin_dir / "gpu11.6").mkdir(parents=True)
    (plugin_dir / "gpu11.8").symlink_to("gpu11.6")
    real = os.path.join(os.path.dirname(mindspore.__file__), "lib", "plugin", "libmindspore_gpu.so.11.6")
    (plugin_dir / "libmindspore_gpu.so.11.6").symlink_to(real)
    lib64 = tmp_path / "cuda" / "lib64"
    lib64.mkdir(parents=True)
    import _ctypes

    shutil.copy(_ctypes.__file__, lib64 / "libcudart.so.11.0")
    for name in cudart_names:
        (lib64 / name).symlink_to("libcudart.so.11.0")
    # The check also runs `nvcc "--version | grep release"` (one argument) from PATH: a stand-in answers it as the
    # image's nvcc 11.8 does (on stderr, exit 1: the check reads no nvcc version), so that no nvcc of this host
    # takes part (nvcc 13 prints the same message on stdout, and the check then reads the version "'").
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text("#!/bin/sh\necho \"nvcc fatal   : Unknown option '$1'\" >&2\nexit 1\n")
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    proc = subprocess.run([sys.executable, "-c", CHECK, str(plugin_dir / "libmindspore_gpu.so.11.6")],
                          env={**os.environ, "LD_LIBRARY_PATH": str(lib64), "GLOG_v": "2",
                               "PATH": os.pathsep.join([str(tmp_path / "bin"), os.environ.get("PATH", "")])},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr


def test_mindspore_own_check_reads_cudart_and_picks_gpu11_6_on_the_image_layout(tmp_path):
    pytest.importorskip("mindspore")
    if not shutil.which("ldd"):
        pytest.skip("MindSpore's check runs ldd")
    cudart = dockerfile_arg("Dockerfile.cuda", "CUDART_CU11_VERSION")
    out, err = _mindspore_check(tmp_path, [f"libcudart.so.{cudart}"])
    assert f"VERSION {cudart}" in out
    assert "FOLDER gpu11.8 True gpu11.6" in out, out
    assert "Cannot find cuda libs" not in err
    # CUDA 11.8 is not in MindSpore 2.10's list of CUDA versions (10.1, 11.1, 11.6): it says so, and only that.
    assert "cuda version 11.8.89 does not match" in err
    warnings = [line for line in err.splitlines() if line.startswith("[WARNING]") and "_check_version.py" in line]
    assert len(warnings) == 1 and "11.8.89 does not match" in warnings[0], warnings


def test_mindspore_own_check_without_the_versioned_name_reads_zero(tmp_path):
    """The layout before: the cu11 wheel's libcudart.so.11.0 alone. MindSpore reads "0" and names gpu0.0."""
    pytest.importorskip("mindspore")
    if not shutil.which("ldd"):
        pytest.skip("MindSpore's check runs ldd")
    out, err = _mindspore_check(tmp_path, [])
    assert "VERSION 0" in out and "FOLDER gpu0.0 False gpu0.0" in out, out
    assert "Cannot find cuda libs" in err
