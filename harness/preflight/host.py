"""Probes: what this host says, as raw text, gathered once into a `Host` the checks read (they never run anything).
 `collect()` runs the commands (each with a timeout; a program that is not installed is `Output(None)`) and reads
the files; `Host.from_folder()` loads the same from recorded outputs, which is how the tests give the checks a
V100 or an Ascend 910 host. A recorded host is a folder with `host.json` (platform, facts, exit codes) and one
`<probe>.txt` per command output (plus `driver-version.info` / `firmware-version.info` for Ascend);
tests/fixtures/preflight/README.md lists them.

The facts come in groups, one function each: the OS and the environment the run would see, the device files and
tools of a GPU or NPU host, the Python that makes .venv (cpu natively), the container engine and the image, this
host's CPU, memory allocators and tuning, its memory and data folder, and what the expected run (the committed run
the results are compared with, `harness.paths.expected_run`) recorded. Every fact a check reads is gathered here
and saved with a recorded host (`Host.to_folder`), so a check of a recorded host reads nothing of the live one; a
recording made before a fact was gathered lacks it, and its check says "not recorded" or leaves its row out.
 Environment read here, as reproduce.sh reads it: HARNESS_DEV_DIR (a fake /dev for tests), CONTAINER_ENGINE,
NPU_SMI, ASCEND_CHIP, PYTHON, DOCKER_BUILDKIT, HARNESS_ALLOCATOR, CONDA_PREFIX, HARNESS_DATA_DIR, PATH.
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

from harness.errors import HarnessError
from harness.host import allocator, configdiff, envinfo
from harness.paths import HARNESS, REPO, expected_env
from harness.preflight import buildplan, parse

NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=" + ",".join(parse.QUERY_FIELDS), "--format=csv,noheader"]
NVIDIA_SMI_QUERY_OLD = ["nvidia-smi", "--query-gpu=" + ",".join(parse.QUERY_FIELDS_OLD), "--format=csv,noheader"]
ASCEND_MANAGEMENT = ("davinci_manager", "devmm_svm", "hisi_hdc")
ASCEND_DRIVER_INFO = "/usr/local/Ascend/driver/version.info"
ASCEND_FIRMWARE_INFO = "/usr/local/Ascend/firmware/version.info"
# The environment variables the checks read, recorded with the host (facts["env"]) where they are set.
ENV = ("DOCKER_BUILDKIT", "ASCEND_CHIP", "HARNESS_ALLOCATOR", "CONDA_PREFIX", "HARNESS_DATA_DIR")
# The package managers the allocator row's install line can name, in the order it tries them.
PACKAGE_TOOLS = ("apt-get", "dnf", "yum", "pacman")
# The run the checks compare this host with: the one `./reproduce.sh cpu` reproduces (its cells' memory peaks
# stand for every platform's host processes).
EXPECTED = ("cpu", "quick")


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

    def to_folder(self, folder: Path) -> None:
        """Record this host as `from_folder` loads it: host.json and one `<probe>.txt` per output that ran."""
        folder.mkdir(parents=True, exist_ok=True)
        for key, out in self.outputs.items():
            if out.rc is not None:
                (folder / f"{key}.txt").write_text(out.text)
        rc = {key: out.rc for key, out in self.outputs.items() if out.rc not in (None, 0)}
        meta = {"platform": self.platform, "rc": rc, "facts": self.facts}
        # not sorted: the rows list a fact's items (the tuning values) in the order they were gathered
        (folder / "host.json").write_text(json.dumps(meta, indent=1) + "\n")


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
    """Free bytes where `path` lives (its nearest existing parent if it does not exist yet), as the build plan reads
    them (buildplan.free_kb: df's Available)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    kb = buildplan.free_kb(str(p))
    return str(p), None if kb is None else kb * 1024


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
    h = Host(platform, facts=os_facts(env, mode))
    if platform == "cuda":
        _nvidia(h)
    if platform == "ascend":
        _ascend(h, env)
    if platform == "cpu" and mode == "native":
        _python(h, env)
    elif mode == "native":
        h.facts["step_python"] = env.get("PYTHON", "python3")
        h.facts["disk_path"], h.facts["free_bytes"] = _free(str(REPO))
    else:
        _container(h, env, image, _chip(h, env, stacks), cdi_paths)
    if platform == "cpu":
        h.facts["cpu"] = cpu_facts()
        if mode == "native":
            h.facts.update(allocator_facts(env))
            h.facts["tuning"] = configdiff.host_tuning()
    h.facts["memory_gib"] = mem_total_gib()
    h.facts["datasets"] = dataset_facts(env)
    h.facts["expected_run"] = expected_run_facts(cpu=(h.facts.get("cpu") or {}).get("model"))
    return h


def os_facts(env: dict[str, str], mode: str) -> dict[str, Any]:
    """The machine, the mode, where the device files are, and the environment variables the checks read."""
    return {"machine": platform_mod.machine(), "mode": mode, "dev_dir": env.get("HARNESS_DEV_DIR", "/dev"),
            "env": {k: env[k] for k in ENV if k in env}}


def _nvidia(h: Host) -> None:
    dev = h.facts["dev_dir"]
    h.facts["nvidia_devices"] = len(glob.glob(os.path.join(dev, "nvidia[0-9]*")))
    if dev == "/dev":  # as reproduce.sh: a fake /dev (tests) means no real nvidia-smi either
        h.outputs["nvidia-smi-query"] = q = run(NVIDIA_SMI_QUERY)
        if parse.unsupported_field(q.text):
            h.outputs["nvidia-smi-query-old"] = run(NVIDIA_SMI_QUERY_OLD)
        h.outputs["nvidia-smi"] = run(["nvidia-smi"])


def _ascend(h: Host, env: dict[str, str]) -> None:
    f, dev = h.facts, h.facts["dev_dir"]
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


def _chip(h: Host, env: dict[str, str], stacks: dict[str, Any] | None) -> str | None:
    """The Ascend chip the image is built for, as reproduce.sh picks it (None off Ascend without ASCEND_CHIP)."""
    picked = env.get("ASCEND_CHIP")
    if h.platform == "ascend" and not picked:
        names = parse.npu_smi_info(h.out("npu-smi-info").text)["names"] if h.out("npu-smi-info").ok else []
        picked = parse.ascend_chip(names, stacks or {})[0] or "910"
    return picked


def _python(h: Host, env: dict[str, str]) -> None:
    """cpu natively: .venv and its stamp, the base Python that makes it, libgomp, and who may install what."""
    f = h.facts
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


def _container(h: Host, env: dict[str, str], image: str | None, ascend_chip: str | None,
               cdi_paths: tuple[str, ...]) -> None:
    """The container engine, where it keeps images, the image and what builds it, GPU access for containers."""
    f, platform = h.facts, h.platform
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
    f["image"] = image_tag(platform, ascend_chip, image)
    f["base_image"] = base_image(platform, ascend_chip)
    f["lock_incomplete"] = lock_incomplete(platform, f["machine"])
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


def cpu_facts() -> dict[str, Any]:
    """This host's CPU model and core count, as env.json records them (the CPU row compares the expected run's)."""
    return {"model": envinfo.cpu_model(), "cores": os.cpu_count()}


def allocator_facts(env: dict[str, str]) -> dict[str, Any]:
    """cpu natively: the memory allocators this host can preload and the one each kind of cell gets here (as env.json
    records them: harness/host/allocator.py's choice, HARNESS_ALLOCATOR honoured), and the package managers that
    could install a missing one. A bad HARNESS_ALLOCATOR is the run's one-line error: recorded, not raised."""
    requested = env.get("HARNESS_ALLOCATOR") or "auto"
    got: dict[str, Any] = {"available": allocator.available(), "error": None}
    try:
        for key, kind in (("per_framework", "model"), ("operator_cells_on_cpu", "operator")):
            got[key] = {fw: allocator.choose(fw, requested, platform="cpu", kind=kind)[0]
                        for fw in allocator.PREFERENCE}
    except HarnessError as e:
        got = {"available": got["available"], "error": str(e)}
    return {"allocators": got,
            "package_tools": {tool: shutil.which(tool, path=env.get("PATH")) for tool in PACKAGE_TOOLS}}


def mem_total_gib(meminfo: str = "/proc/meminfo") -> float | None:
    """This host's memory (GiB), as /proc/meminfo's MemTotal says; None where unreadable."""
    m = re.search(r"^MemTotal:\s+(\d+) kB", _read(meminfo) or "", re.M)
    return int(m.group(1)) / 2**20 if m else None


def dataset_folders(data_pkg: Path = HARNESS / "data") -> dict[str, str]:
    """{dataset: its folder under the data directory}, from each harness/data/<dataset>.py's FOLDER line (read as
    text: the check runs before any .venv)."""
    out = {}
    for path in sorted(data_pkg.glob("*.py")):
        m = re.search(r'^FOLDER\s*=\s*"([^"]+)"', path.read_text(), re.M)
        if m:
            out[path.stem] = m.group(1)
    return out


def dataset_facts(env: dict[str, str]) -> dict[str, Any]:
    """The data folder (--data-dir's default: $HARNESS_DATA_DIR, else ./data), the datasets the run reads and
    those already there."""
    where = Path(env.get("HARNESS_DATA_DIR") or REPO / "data")
    folders = dataset_folders()
    present = [d for d, sub in folders.items() if (where / sub).is_dir() and any((where / sub).iterdir())]
    return {"dir": str(where), "folders": folders, "present": present}


def largest_rss(run: Path) -> dict[str, Any] | None:
    """The largest peak RSS (GiB) a cell of a committed run recorded, and that cell."""
    best = None
    for path in run.glob("cells/**/r*.json"):
        if not path.name[1:-5].isdigit():
            continue
        try:
            r = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        mb = r.get("peak_rss_mb")
        if isinstance(mb, (int, float)) and (best is None or mb / 1024 > best["gib"]):
            best = {"gib": mb / 1024, "cell": r.get("cell", "?")}
    return best


def expected_run_facts(platform: str = EXPECTED[0], profile: str = EXPECTED[1],
                       cpu: str | None = None) -> dict[str, Any] | None:
    """What the expected run recorded (its env.json, read once; its cells' peaks), the nearest CPU's to `cpu` where
    given (harness.paths.expected_run): its name, the allocators its cells got, its CPU, its largest cell's peak
    RSS. None where that run is not committed or not readable."""
    found = expected_env(platform, profile, cpu)
    if not found or not found[1]:
        return None
    folder, env = found
    a = env.get("allocators") or {}
    return {"name": folder.name, "allocators": {k: a[k] for k in ("per_framework", "operator_cells_on_cpu") if k in a},
            "cpu": {k: v for k, v in (env.get("cpu") or {}).items() if k in ("model", "cores")},
            "largest_rss": largest_rss(folder)}


def allocator_host(env: dict[str, str] | None = None) -> Host:
    """The facts the allocator row reads, alone (what reproduce.sh asks before a native cpu run)."""
    env = dict(os.environ if env is None else env)
    h = Host("cpu", facts=os_facts(env, "native"))
    h.facts.update(allocator_facts(env))
    h.facts["expected_run"] = expected_run_facts(cpu=envinfo.cpu_model())
    return h
