"""The CUDA image's inputs, as far as this machine (no GPU, no registry) can check them without building it:
the two locks, what Dockerfile.cuda sets for a GPU host, and how reproduce.sh runs it. The build itself and
the checks inside the built image are tools/check_image.sh --cuda (tox -e image-cuda)."""

import re
import shutil
import struct
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.test_reproduce import _path_without_engines, fake_engine
from tests.test_reproduce import run as run_reproduce

CUDA11 = {"nvidia-cuda-runtime-cu11", "nvidia-cublas-cu11", "nvidia-cudnn-cu11", "nvidia-cufft-cu11",
          "nvidia-curand-cu11", "nvidia-cusolver-cu11", "nvidia-cusparse-cu11", "nvidia-cuda-nvrtc-cu11"}


def _lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes) of a requirements/*.txt lock."""
    text = (REPO / "requirements" / name).read_text()
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block)
        if m:
            pins[m.group(1).lower()] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return pins


def _env(dockerfile: str) -> dict[str, str]:
    """The ENV keys and values a Dockerfile sets (all ENV instructions, continuation lines joined)."""
    text = (REPO / dockerfile).read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', line[4:]):
                env[key] = value.strip('"')
    return env


def test_cuda_lock_is_complete_from_pypi_alone_with_every_hash():
    text = (REPO / "requirements" / "cuda.txt").read_text()
    assert "LOCK-INCOMPLETE" not in text
    assert not re.search(r"^\s*--(extra-)?index-url", text, re.M), "no index besides PyPI"
    pins = _lock("cuda.txt")
    assert pins["torch"][0] == "2.7.1" and pins["mindspore"][0] == "2.10.0"
    assert all(hashes for _, hashes in pins.values()), [n for n, (_, h) in pins.items() if not h]
    # PyPI's torch 2.7.1 is the CUDA 12.6 build: its CUDA libraries are the cu12 wheels, never cu11 ones.
    assert pins["nvidia-cuda-runtime-cu12"][0].startswith("12.6.")
    assert not [n for n in pins if n.endswith("-cu11")]


def test_cuda11_libs_lock_has_what_the_mindspore_plugin_needs_with_every_hash():
    pins = _lock("cuda11-libs.txt")
    assert set(pins) == CUDA11
    assert all(hashes for _, hashes in pins.values())
    assert pins["nvidia-cudnn-cu11"][0].startswith("8.9."), "cuDNN 8 (the plug-in links libcudnn.so.8), 8.9 for sm_90"
    assert all(v.startswith("11.") for n, (v, _) in pins.items() if n in {"nvidia-cuda-runtime-cu11",
                                                                         "nvidia-cuda-nvrtc-cu11"})


def test_dockerfile_cuda_sets_what_a_gpu_host_and_any_uid_need():
    env = _env("Dockerfile.cuda")
    assert "CUDA_HOME" not in env, "with CUDA_HOME set MindSpore asks $CUDA_HOME/bin/nvcc and loads no plug-in"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["CUDA_CACHE_PATH"].startswith("/results/")
    assert env["USER"] and env["HOME"] and env["TORCHINDUCTOR_CACHE_DIR"].startswith(env["HOME"])
    text = (REPO / "Dockerfile.cuda").read_text()
    assert "uv python" not in text and "uv==" not in text
    assert re.search(r"^ARG BASE_IMAGE=", text, re.M).group(0) and \
        re.search(r"^ARG BASE_IMAGE=(\S+)", text, re.M).group(1) == \
        re.search(r"^ARG BASE_IMAGE=(\S+)", (REPO / "Dockerfile.cpu").read_text(), re.M).group(1)
    # The CUDA 11 wheels go outside the venv, their libraries where the plug-in's RPATH ends.
    assert re.search(r"--target /opt/cuda11\s.*cuda11-libs\.txt", text.replace("\\\n", " "))
    assert "ln -s /opt/cuda11/nvidia/*/lib/lib*.so* /usr/local/cuda/lib64/" in text


def test_podman_gets_selinux_labels_off_for_the_gpu_and_docker_does_not(tmp_path):
    lines = {}
    for engine in ("podman", "docker"):
        where = tmp_path / engine
        where.mkdir()
        bin_dir = fake_engine(where, engine)
        proc = run_reproduce(where, "cuda", "--dry-run", "--out", where / "o",
                             path=f"{bin_dir}:{_path_without_engines(where)}")
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
