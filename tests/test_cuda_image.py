"""The CUDA image's inputs, as far as this machine (no GPU, no registry) can check them without building it:
the two locks, what Dockerfile.cuda sets for a GPU host, and how reproduce.sh runs it. The build itself and
the checks inside the built image are tools/check_image.sh --cuda (tox -e image-cuda)."""

import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

from tests.helpers import REPO, dockerfile_env, fake_engine, lock, path_without_engines, run_reproduce

CUDA11 = {"nvidia-cuda-runtime-cu11", "nvidia-cublas-cu11", "nvidia-cudnn-cu11", "nvidia-cufft-cu11",
          "nvidia-curand-cu11", "nvidia-cusolver-cu11", "nvidia-cusparse-cu11", "nvidia-cuda-nvrtc-cu11"}


def test_cuda_lock_is_complete_from_pypi_alone_with_every_hash():
    text = (REPO / "requirements" / "cuda.txt").read_text()
    assert "LOCK-INCOMPLETE" not in text
    assert not re.search(r"^\s*--(extra-)?index-url", text, re.M), "no index besides PyPI"
    pins = lock("cuda.txt")
    assert pins["torch"][0] == "2.7.1" and pins["mindspore"][0] == "2.10.0"
    assert all(hashes for _, hashes in pins.values()), [n for n, (_, h) in pins.items() if not h]
    # PyPI's torch 2.7.1 is the CUDA 12.6 build: its CUDA libraries are the cu12 wheels, never cu11 ones.
    assert pins["nvidia-cuda-runtime-cu12"][0].startswith("12.6.")
    assert not [n for n in pins if n.endswith("-cu11")]


def test_cuda11_libs_lock_has_what_the_mindspore_plugin_needs_with_every_hash():
    pins = lock("cuda11-libs.txt")
    assert set(pins) == CUDA11
    assert all(hashes for _, hashes in pins.values())
    assert pins["nvidia-cudnn-cu11"][0].startswith("8.9."), "cuDNN 8 (the plug-in links libcudnn.so.8), 8.9 for sm_90"
    assert all(v.startswith("11.") for n, (v, _) in pins.items() if n in {"nvidia-cuda-runtime-cu11",
                                                                         "nvidia-cuda-nvrtc-cu11"})


def test_dockerfile_cuda_sets_what_a_gpu_host_and_any_uid_need():
    env = dockerfile_env("Dockerfile.cuda")
    # MindSpore's CUDA 11 tree is named to the harness, not set image-wide: PyTorch's CUDA 12 build must not take
    # it for its CUDA home (CUDA_HOME, CUDA_PATH, nvcc on PATH and /usr/local/cuda are where it looks).
    assert "CUDA_HOME" not in env and "CUDA_PATH" not in env
    assert env["HARNESS_MINDSPORE_CUDA_HOME"] == "/opt/cuda11/toolkit"
    assert "/opt/cuda11" not in env["PATH"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["CUDA_CACHE_PATH"] == "/cache/cuda-jit"  # a kept host folder reproduce.sh mounts, not the run folder
    assert env["USER"] and env["HOME"] and env["TORCHINDUCTOR_CACHE_DIR"].startswith(env["HOME"])
    text = (REPO / "Dockerfile.cuda").read_text()
    assert "uv python" not in text and "uv==" not in text
    assert re.search(r"^ARG BASE_IMAGE=", text, re.M).group(0) and \
        re.search(r"^ARG BASE_IMAGE=(\S+)", text, re.M).group(1) == \
        re.search(r"^ARG BASE_IMAGE=(\S+)", (REPO / "Dockerfile.cpu").read_text(), re.M).group(1)
    # The CUDA 11 wheels go outside the venv, their libraries where the plug-in's RPATH ends.
    assert re.search(r"--target /opt/cuda11\s.*cuda11-libs\.txt", text.replace("\\\n", " "))
    assert "ln -s /opt/cuda11/nvidia/*/lib/lib*.so* /opt/cuda11/toolkit/lib64/" in text
    assert "/usr/local/cuda" not in text.split("FROM ${BASE_IMAGE}", 1)[1], "nothing may create /usr/local/cuda"


def test_dockerfile_cuda_takes_a_real_nvcc_11_8_pinned_by_version_and_sha256():
    """PyPI's nvidia-cuda-nvcc-cu11 wheels have no nvcc binary (11.7.99 and 11.8.89: ptxas, libnvvm, libdevice),
    so nvcc comes from Debian bookworm's non-free nvidia-cuda-toolkit, pinned, and the build checks its release."""
    text = (REPO / "Dockerfile.cuda").read_text()
    version = re.search(r"^ARG NVCC_DEB_VERSION=(\S+)", text, re.M).group(1)
    assert version.startswith("11.8.89~")
    assert re.search(r"^ARG NVCC_DEB_SHA256=[0-9a-f]{64}$", text, re.M)
    assert '"nvidia-cuda-toolkit=${NVCC_DEB_VERSION}"' in text and "sha256sum -c" in text
    assert "grep -q 'release 11\\.8,'" in text, "the build must fail unless nvcc reports release 11.8"
    assert "$t/bin/nvcc.profile" in text and "libdevice.10.bc $t/nvvm/libdevice/" in text


def test_dockerfile_cuda_first_layer_takes_exactly_the_locks_nvidia_wheels_with_their_hashes(tmp_path):
    """Layer 1 of Dockerfile.cuda installs torch's nvidia-*-cu12 wheels alone (a builder holds a layer about three
    times while committing it, so smaller layers need less disk). It filters the lock with awk: run that very awk
    command on the real lock and check pip would get every nvidia-* pin, each with its hashes, and nothing else."""
    if not shutil.which("awk"):
        pytest.skip("no awk on this host")
    text = (REPO / "Dockerfile.cuda").read_text()
    program = re.search(r"awk '([^']+)' /tmp/requirements/cuda\.txt > /tmp/cuda-nvidia\.txt", text).group(1)
    out = subprocess.run(["awk", program, str(REPO / "requirements" / "cuda.txt")], capture_output=True, text=True,
                         check=True).stdout
    (tmp_path / "cuda-nvidia.txt").write_text(out)
    selected = {n: v for n, v in lock("cuda.txt").items() if n.startswith("nvidia-")}
    assert len(selected) >= 10 and "nvidia-cudnn-cu12" in selected
    got = re.split(r"\n(?=[A-Za-z0-9])", out.strip())
    assert len(got) == len(selected)
    for block in got:
        name, version = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block).groups()
        assert selected[name.lower()] == (version, re.findall(r"--hash=sha256:([0-9a-f]{64})", block)), name
    assert all(re.search(r"--hash=sha256:[0-9a-f]{64}", b) for b in got), "pip --require-hashes needs every hash"


def test_only_mindspore_cells_get_the_cuda_11_home(monkeypatch):
    from harness.frameworks import mindspore, pytorch

    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("HARNESS_MINDSPORE_CUDA_HOME", raising=False)
    assert "CUDA_HOME" not in mindspore.process_env("cuda"), "natively the host's own CUDA_HOME is kept"
    monkeypatch.setenv("HARNESS_MINDSPORE_CUDA_HOME", "/opt/cuda11/toolkit")
    env = mindspore.process_env("cuda")
    assert env["CUDA_HOME"] == "/opt/cuda11/toolkit" and env["LD_LIBRARY_PATH"] == "/opt/cuda11/toolkit/lib64"
    monkeypatch.setenv("LD_LIBRARY_PATH", "/host/lib")
    assert mindspore.process_env("cuda")["LD_LIBRARY_PATH"] == "/opt/cuda11/toolkit/lib64:/host/lib"
    assert "CUDA_HOME" not in mindspore.process_env("cpu") and "CUDA_HOME" not in mindspore.process_env("ascend")
    assert "CUDA_HOME" not in pytorch.process_env("cuda")


def _probe_verdict(framework: str, output: str):
    sys.path.insert(0, str(REPO / "tools"))
    import gpu_probe

    return gpu_probe.verdict({"framework": framework, "ok": False, "output": output})


FIXTURES = REPO / "tests" / "fixtures" / "gpu_probe"


@pytest.mark.parametrize("fixture, expected", [
    # Recorded with MindSpore 2.10.0 on this CPU machine: CUDA_HOME unset (today's image did this) ...
    ("mindspore-no-cuda-home.txt", "never tried a GPU plug-in"),
    # ... and CUDA_HOME with a real nvcc 11.8 but no CUDA 11 libraries: the plug-in is tried and lacks cuBLAS.
    ("mindspore-plugin-lacks-cublas.txt", "failed for another reason than the driver's libcuda.so.1"),
    # Recorded in the CUDA image as it was before MindSpore got a CUDA_HOME (commit 6931724): the plug-in never tried.
    ("mindspore-image-before-fix.txt", "never tried a GPU plug-in"),
    # Recorded in the CUDA image built by tools/check_image.sh --cuda, no GPU: only the driver is missing.
    ("mindspore-image-no-driver.txt", None),
    ("pytorch-image-no-driver.txt", None),
])
def test_gpu_probe_accepts_only_the_missing_driver(fixture, expected):
    framework = fixture.split("-")[0]
    got = _probe_verdict(framework, (FIXTURES / fixture).read_text())
    assert (got is None) if expected is None else (expected in (got or "")), got


def test_gpu_probe_refuses_pytorch_without_cuda():
    assert "other than the missing NVIDIA driver" in _probe_verdict(
        "pytorch", 'AssertionError: Torch not compiled with CUDA enabled\n')


@pytest.mark.parametrize("release, plugin", [("11.8", "libmindspore_gpu.so.11.6"), ("11.6", "libmindspore_gpu.so.11.6"),
                                             ("11.1", "libmindspore_gpu.so.11.1"), ("12.4", None)])
def test_mindspore_picks_its_gpu_plugin_from_the_nvcc_release(tmp_path, release, plugin):
    """The vendor fact the CUDA image rests on, from MindSpore's own loader: `$CUDA_HOME/bin/nvcc --version`
    decides which plug-in it tries (a stub nvcc prints the release line of the real one)."""
    pytest.importorskip("mindspore")
    (tmp_path / "bin").mkdir()
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.89'\n")
    nvcc.chmod(0o755)
    proc = subprocess.run([sys.executable, "-c", "import mindspore as ms; ms.set_device('GPU')"],
                          env={**os.environ, "CUDA_HOME": str(tmp_path), "GLOG_v": "2"},
                          capture_output=True, text=True, timeout=120)
    tried = sorted(set(re.findall(r"Load dynamic library: (libmindspore_gpu\S*) failed", proc.stdout + proc.stderr)))
    if plugin is None:
        assert not tried and "can not find suitable gpu plugin" in proc.stdout + proc.stderr
    else:
        assert tried == [plugin], proc.stderr[-2000:]


def test_podman_gets_selinux_labels_off_for_the_gpu_and_docker_does_not(tmp_path):
    lines = {}
    for engine in ("podman", "docker"):
        where = tmp_path / engine
        where.mkdir()
        bin_dir = fake_engine(where, engine)
        proc = run_reproduce(where, "cuda", "--dry-run", "--out", where / "o",
                             path=f"{bin_dir}:{path_without_engines(where)}")
        assert proc.returncode == 0, proc.stderr
        lines[engine] = next(line for line in proc.stdout.splitlines() if "--platform cuda" in line)
    assert "--security-opt=label=disable" in lines["podman"] and "--device nvidia.com/gpu=all" in lines["podman"]
    assert "--security-opt" not in lines["docker"] and "--gpus all" in lines["docker"]


def _fatbin_entry(kind: int, sm: int, payload: bytes) -> bytes:
    """One fat binary entry: kind (1 PTX, 2 SASS), a 64-byte header with the sm version at offset 28."""
    header = struct.pack("<HHIQ", kind, 0x101, 64, len(payload)) + bytes(12) + struct.pack("<I", sm)
    return header + bytes(64 - len(header)) + payload


def test_fatbin_archs_reads_sass_and_ptx_from_an_elf_section(tmp_path):
    objcopy = shutil.which("objcopy")
    if not objcopy or not shutil.which("readelf"):
        pytest.skip("needs binutils (objcopy, readelf)")
    entries = [_fatbin_entry(2, 70, b"\x7fELF" + bytes(60)), _fatbin_entry(2, 90, bytes(32)),
               _fatbin_entry(1, 86, b".version 7.6\n.target sm_86\n\0\0\0")]
    blob = b""
    for group in (entries[:2], entries[2:]):  # two fat binaries, 8-byte padding between them
        body = b"".join(group)
        blob += struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body + bytes(8)
    (tmp_path / "fatbin.bin").write_bytes(blob)
    lib = tmp_path / "libfake.so"
    subprocess.run([objcopy, "--add-section", f".nv_fatbin={tmp_path / 'fatbin.bin'}", sys.executable, str(lib)],
                   check=True, capture_output=True)
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "fatbin_archs.py"), str(lib)], capture_output=True,
                          text=True, check=True)
    assert proc.stdout.strip() == f"{lib}: sass sm_70 sm_90 ptx sm_86"
    plain = tmp_path / "libplain.so"
    shutil.copy(sys.executable, plain)
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "fatbin_archs.py"), str(plain)], capture_output=True,
                          text=True, check=True)
    assert proc.stdout.strip() == f"{plain}:", "a library without GPU code has none"
