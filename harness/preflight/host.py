"""Probes: what this host says, as raw text, gathered once into a `Host` the checks read (they never run anything).

`collect()` runs the commands (each with a timeout; a program that is not installed is `Output(None)`) and reads
the files; `Host.from_folder()` loads the same from recorded outputs, which is how the tests give the checks a
V100 or an Ascend 910 host. A recorded host is a folder with `host.json` (platform, facts, exit codes) and one
`<probe>.txt` per command output (plus `driver-version.info` / `firmware-version.info` for Ascend);
tests/fixtures/preflight/README.md lists them.

Environment read here, as reproduce.sh reads it: HARNESS_DEV_DIR (a fake /dev for tests), CONTAINER_ENGINE,
NPU_SMI, ASCEND_CHIP, PYTHON, DOCKER_BUILDKIT.
"""

from __future__ import annotations

import ctypes.util
import glob
import hashlib
import json
import os
import platform as platform_mod
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.preflight import parse

REPO = Path(__file__).resolve().parent.parent.parent
NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=" + ",".join(parse.QUERY_FIELDS), "--format=csv,noheader"]
NVIDIA_SMI_QUERY_OLD = ["nvidia-smi", "--query-gpu=" + ",".join(parse.QUERY_FIELDS_OLD), "--format=csv,noheader"]
ASCEND_MANAGEMENT = ("davinci_manager", "devmm_svm", "hisi_hdc")
ASCEND_DRIVER_INFO = "/usr/local/Ascend/driver/version.info"
ASCEND_FIRMWARE_INFO = "/usr/local/Ascend/firmware/version.info"


@dataclass
class Output:
    """What one command printed (stdout and stderr together) and its exit code; rc None: not installed."""

    rc: int | None
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def first_line(self) -> str:
        return next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")


@dataclass
class Host:
    platform: str
    outputs: dict[str, Output] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def out(self, key: str) -> Output:
        return self.outputs.get(key, Output(None))

    @classmethod
    def from_folder(cls, folder: Path) -> Host:
        meta = json.loads((folder / "host.json").read_text())
        rcs = meta.get("rc", {})
        outputs = {p.stem: Output(rcs.get(p.stem, 0), p.read_text()) for p in sorted(folder.glob("*.txt"))}
        facts = meta.get("facts", {})
        for p in folder.glob("*.info"):  # driver-version.info -> facts["driver_version_info"]
            facts[p.name.replace("-", "_").replace(".", "_")] = p.read_text()
        return cls(meta["platform"], outputs, facts)


def run(cmd: list[str], timeout: float = 30, env: dict[str, str] | None = None) -> Output:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except FileNotFoundError:
        return Output(None)
    except PermissionError as e:
        return Output(126, str(e))
    except subprocess.TimeoutExpired:
        return Output(124, f"{cmd[0]} did not answer within {timeout:.0f} s")
    return Output(p.returncode, (p.stdout or "") + (p.stderr or ""))


def _device(path: str) -> dict[str, Any]:
    import grp

    try:
        st = os.stat(path)
    except OSError:
        return {"exists": False, "rw": False, "group": None}
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return {"exists": True, "rw": os.access(path, os.R_OK | os.W_OK), "group": group}


def _user() -> dict[str, Any]:
    import grp

    names = []
    for gid in os.getgroups():
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.append(str(gid))
    try:
        hw = grp.getgrnam("HwHiAiUser").gr_gid
    except KeyError:
        hw = None
    return {"uid": os.getuid(), "gid": os.getgid(), "groups": names, "hw_gid": hw}


def _free(path: str) -> tuple[str, int | None]:
    """Free bytes where `path` lives (its nearest existing parent if it does not exist yet)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return str(p), shutil.disk_usage(p).free
    except OSError:
        return str(p), None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def image_tag(platform: str, chip: str | None, image: str | None) -> str:
    if image:
        return image
    return f"ms-pt-harness:ascend-{chip}" if platform == "ascend" else f"ms-pt-harness:{platform}"


def base_image(platform: str, chip: str | None) -> str | None:
    """The Dockerfile's `ARG BASE_IMAGE=` default, with ${ASCEND_CHIP} filled in (as reproduce.sh does)."""
    text = _read(str(REPO / f"Dockerfile.{platform}")) or ""
    for line in text.splitlines():
        if line.startswith("ARG BASE_IMAGE="):
            return line.split("=", 1)[1].strip().replace("${ASCEND_CHIP}", chip or "910")
    return None


def lock_incomplete(platform: str, machine: str) -> str | None:
    """Why requirements/PLATFORM.txt cannot build here (its `# LOCK-INCOMPLETE` lines, as reproduce.sh reads them)."""
    for line in (_read(str(REPO / "requirements" / f"{platform}.txt")) or "").splitlines():
        for tag in ("# LOCK-INCOMPLETE:", f"# LOCK-INCOMPLETE-ARCH {machine}:"):
            if line.startswith(tag):
                return line[len(tag):].strip()
    return None


def _engine(env: dict[str, str]) -> tuple[str | None, Output]:
    forced = env.get("CONTAINER_ENGINE")
    for name in ([forced] if forced else ["docker", "podman"]):
        info = run([name, "info"])
        if info.ok or forced:
            return name, info
    return None, Output(None)


def collect(platform: str, *, mode: str, image: str | None = None, env: dict[str, str] | None = None,
            cdi_paths: tuple[str, ...] = (), stacks: dict[str, Any] | None = None) -> Host:
    """Everything the checks read, probed on this host. `mode`: "native" (cpu .venv, or --native with $PYTHON)
    or "container". `cdi_paths`: where a CDI spec may be (host.toml); `stacks`: ascend.toml's chips (the chip
    names the image, as reproduce.sh picks it: ASCEND_CHIP, else npu-smi, else 910). The training steps are run
    later (step.py), once the checks know the device is there."""
    env = dict(os.environ if env is None else env)
    dev = env.get("HARNESS_DEV_DIR", "/dev")
    machine = platform_mod.machine()
    h = Host(platform, facts={"machine": machine, "mode": mode, "dev_dir": dev,
                              "env": {k: env[k] for k in ("DOCKER_BUILDKIT", "ASCEND_CHIP", "HARNESS_ALLOCATOR")
                                      if k in env}})
    f = h.facts
    if platform == "cuda":
        f["nvidia_devices"] = len(glob.glob(os.path.join(dev, "nvidia[0-9]*")))
        if dev == "/dev":  # as reproduce.sh: a fake /dev (tests) means no real nvidia-smi either
            h.outputs["nvidia-smi-query"] = q = run(NVIDIA_SMI_QUERY)
            if parse.unsupported_field(q.text):
                h.outputs["nvidia-smi-query-old"] = run(NVIDIA_SMI_QUERY_OLD)
            h.outputs["nvidia-smi"] = run(["nvidia-smi"])
    if platform == "ascend":
        npus = sorted(glob.glob(os.path.join(dev, "davinci[0-9]*")))
        f["ascend_devices"] = {"/dev/" + os.path.basename(p): _device(p) for p in npus}
        for name in ASCEND_MANAGEMENT:
            f["ascend_devices"]["/dev/" + name] = _device(os.path.join(dev, name))
        f["user"] = _user()
        smi = env.get("NPU_SMI", "npu-smi")
        f["npu_smi"] = shutil.which(smi)
        h.outputs["npu-smi-info"] = run([smi, "info"])
        f["driver_version_info"] = _read(ASCEND_DRIVER_INFO)
        f["firmware_version_info"] = _read(ASCEND_FIRMWARE_INFO)
    chip = env.get("ASCEND_CHIP")
    if platform == "ascend" and not chip:
        names = parse.npu_smi_info(h.out("npu-smi-info").text)["names"] if h.out("npu-smi-info").ok else []
        chip = parse.ascend_chip(names, stacks or {})[0] or "910"
    if platform == "cpu" and mode == "native":
        venv_py = REPO / ".venv" / "bin" / "python"
        lock = REPO / "requirements" / "cpu.txt"
        stamp = _read(str(REPO / ".venv" / ".requirements.sha256"))
        # The stamp is written last (reproduce.sh): a .venv without one is a build that did not finish.
        f["venv"] = {"python": str(venv_py) if venv_py.exists() else None, "stamp": stamp is not None,
                     "stamp_ok": (stamp or "").strip() == hashlib.sha256(lock.read_bytes()).hexdigest()}
        base = env.get("PYTHON") or shutil.which("python3.11") or shutil.which("python3")
        f["base_python"] = base
        if base:
            h.outputs["python-version"] = run([base, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
            # Debian and Ubuntu ship venv's ensurepip apart (python3.11-venv): without it `-m venv` makes no pip
            h.outputs["python-venv"] = run([base, "-c", "import ensurepip, venv"])
        # MindSpore's CPU kernels link the system's OpenMP runtime (Debian's libgomp1), which a minimal host lacks
        f["libgomp"] = ctypes.util.find_library("gomp")
        # who may install it: reproduce.sh --build does, as root with apt-get
        f["uid"] = os.getuid()
        f["apt_get"] = shutil.which("apt-get", path=env.get("PATH"))
        f["disk_path"], f["free_bytes"] = _free(str(REPO))
    elif mode == "native":
        f["step_python"] = env.get("PYTHON", "python3")
        f["disk_path"], f["free_bytes"] = _free(str(REPO))
    else:
        engine, info = _engine(env)
        f["engine"] = engine
        h.outputs["engine-info"] = info
        root = None
        if engine and os.path.basename(engine) == "podman":
            h.outputs["podman-version"] = run([engine, "version"])
            root = parse.podman_graph_root(info.text)
            # `podman info`'s host.security.rootless: rootful podman takes --user, as reproduce.sh passes it
            f["rootless"] = re.search(r"^\s*rootless:\s*false\s*$", info.text, re.M) is None
        elif engine:
            h.outputs["buildx"] = run([engine, "buildx", "version"])
            root = parse.docker_info(info.text)["root_dir"]
        f["disk_path"], f["free_bytes"] = _free(root or str(REPO))
        f["image"] = image_tag(platform, chip, image)
        f["base_image"] = base_image(platform, chip)
        f["lock_incomplete"] = lock_incomplete(platform, machine)
        f["wheelhouse_wheels"] = len(glob.glob(str(REPO / "wheelhouse" / platform / "*.whl")))
        if engine and info.ok:
            h.outputs["image-inspect"] = run([engine, "image", "inspect", f["image"]])
            if f["base_image"]:
                h.outputs["base-inspect"] = run([engine, "image", "inspect", f["base_image"]])
        if platform == "cuda":
            h.outputs["nvidia-ctk"] = run(["nvidia-ctk", "--version"])
            f["runtime_hook"] = shutil.which("nvidia-container-runtime-hook")
            f["cdi_specs"] = [p for p in cdi_paths if os.path.exists(p)]
        if platform == "ascend":
            f.setdefault("user", _user())
    return h
