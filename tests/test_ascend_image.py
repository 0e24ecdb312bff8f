"""The Ascend image as far as a machine without an NPU can check it: Dockerfile.ascend against the lock and
the vendor's CANN image, the CANN environment scripts, the lock against CANN's own Python requirements,
the torch hashes' provenance, the Ascend apex sources' pins, and reproduce.sh's chip pick and run options
from stand-in `npu-smi` output (tests/fixtures/npusmi)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.helpers import REPO, ascend_dry_run, dockerfile_arg, one_line_error

DOCKERFILE = (REPO / "Dockerfile.ascend").read_text()
LOCK = (REPO / "requirements" / "ascend.txt").read_text()

# The vendor's quick start (github.com/Ascend/cann-container-image, OVERVIEW.zh.md, "docker run"): every
# device and bind mount it passes. reproduce.sh adds :ro to the mounts.
VENDOR_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
VENDOR_MOUNTS = ("/usr/local/dcmi:/usr/local/dcmi", "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi",
                 "/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
                 "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info",
                 "/etc/ascend_install.info:/etc/ascend_install.info")
# The vendor's ENTRYPOINT (cann/9.1.0-910-ubuntu22.04-py3.11/Dockerfile), in its order.
VENDOR_ENV_SCRIPTS = ("ascend-toolkit/set_env.sh", "share/info/ascendnpu-ir/bin/set_env.sh", "nnal/atb/set_env.sh")


def lock_pins(text: str = LOCK) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+) \\$", text, re.M)}


def lock_hashes(name: str, text: str = LOCK) -> list[str]:
    m = re.search(rf"^{name}==\S+ \\\n((?:    --hash=sha256:[0-9a-f]{{64}}.*\n)+)", text, re.M)
    return re.findall(r"sha256:([0-9a-f]{64})", m.group(1)) if m else []


def arg_default(name: str) -> str:
    return dockerfile_arg("Dockerfile.ascend", name)


# --------------------------------------------------------------------------- lock


def test_lock_is_not_globally_incomplete_and_torch_hashes_have_two_sources():
    assert not re.search(r"^# LOCK-INCOMPLETE:", LOCK, re.M), "the ascend lock must carry torch hashes"
    external = {}
    for line in (REPO / "requirements" / "external-wheel-hashes.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sha, *rest = line.split(None, 2)
            external[sha] = (name, [s for s in (rest[0] if rest else "").split(";") if s.strip()])
    hashes = lock_hashes("torch")
    assert hashes, "no torch line with hashes in requirements/ascend.txt"
    for sha in hashes:
        assert sha in external, f"torch hash {sha} is not in requirements/external-wheel-hashes.txt"
        filename, sources = external[sha]
        assert filename.startswith(f"torch-{lock_pins()['torch']}+cpu-cp311-cp311-manylinux"), filename
        assert len(sources) >= 2, f"{filename}: a hash needs two agreeing sources, has {len(sources)}"
        assert sha in LOCK.split("\n\n")[0], "the lock's header must name where each torch hash came from"
    for arch in ("x86_64", "aarch64"):
        has_hash = any(name.endswith(f"_{arch}.whl") and sha in hashes for sha, (name, _) in external.items())
        refused = re.search(rf"^# LOCK-INCOMPLETE-ARCH {arch}:", LOCK, re.M) is not None
        assert has_hash != refused, f"{arch}: a hash and a refusal (or neither): {has_hash=} {refused=}"


def test_lock_satisfies_canns_own_python_requirements():
    """requirements/ascend-cann-base.list is the vendor's list; each package must be locked at a version its
    specifier allows, unless the line records a conflict and why."""
    pins = lock_pins()
    checked = conflicts = 0
    for raw in (REPO / "requirements" / "ascend-cann-base.list").read_text().splitlines():
        spec, _, comment = raw.partition("#")
        if not spec.strip():
            continue
        req = Requirement(spec.strip())
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"CANN needs {req.name}; requirements/ascend.txt does not lock it"
        if comment.strip().startswith("conflict:"):
            conflicts += 1
            assert pins[name] not in req.specifier, f"{name} is marked as a conflict but {pins[name]} satisfies it"
            continue
        assert pins[name] in req.specifier, f"{name}=={pins[name]} does not satisfy CANN's {req}"
        checked += 1
    assert checked >= 12 and conflicts == 1  # the vendor lists 13 packages; protobuf==3.20 is the conflict


# --------------------------------------------------------------------------- Dockerfile


def test_labels_and_version_args_match_the_lock():
    pins = lock_pins()
    for arg, pkg in (("TORCH_VERSION", "torch"), ("TORCH_NPU_VERSION", "torch-npu"),
                     ("MINDSPORE_VERSION", "mindspore"), ("NUMPY_VERSION", "numpy")):
        assert arg_default(arg) == pins[pkg], f"ARG {arg}={arg_default(arg)} but the lock pins {pkg}=={pins[pkg]}"
    labels = dict(re.findall(r'(io\.ms-pt-harness\.[a-z_]+)="([^"]*)"', DOCKERFILE))
    assert labels["io.ms-pt-harness.torch"] == "${TORCH_VERSION}+cpu"
    for label, arg in (("torch_npu", "TORCH_NPU_VERSION"), ("mindspore", "MINDSPORE_VERSION"),
                       ("numpy", "NUMPY_VERSION"), ("cann", "CANN_VERSION"), ("chip", "ASCEND_CHIP")):
        assert labels[f"io.ms-pt-harness.{label}"] == "${" + arg + "}", label
    assert arg_default("CANN_VERSION") == "9.1.0" and "cann:9.1.0-" in arg_default("BASE_IMAGE")


def test_chip_arg_selects_the_base_tag():
    assert arg_default("ASCEND_CHIP") == "910"
    assert arg_default("BASE_IMAGE") == "quay.io/ascend/cann:9.1.0-${ASCEND_CHIP}-ubuntu22.04-py3.11"
    assert re.search(r"case \"\$\{ASCEND_CHIP\}\" in \\\n\s+910\|910b\) ;;", DOCKERFILE), "the chip must be checked"


def test_image_sources_the_cann_environment_and_never_installs_pypi_apex():
    assert 'ENTRYPOINT ["/opt/harness/entrypoint.sh"]' in DOCKERFILE
    assert "COPY docker/ascend/entrypoint.sh docker/ascend/cann_env.sh /opt/harness/" in DOCKERFILE
    # what the entrypoint sources, in which order and with which arguments: the entrypoint tests below
    installs = [line for line in DOCKERFILE.splitlines() if "pip install" in line]
    apex_installs = [line for line in installs if "apex" in line]
    assert apex_installs == ["      /opt/venv/bin/pip install --no-deps --no-index /opt/apex-dist/apex-*.whl; \\"]
    assert "--system-site-packages" not in DOCKERFILE  # CANN's base packages (protobuf 3.20) stay out of the venv


def test_apex_pins_agree_between_dockerfile_and_fetch_tool():
    tool = (REPO / "tools" / "apex_sources.sh").read_text()
    for name in ("NVIDIA_APEX_COMMIT", "NVIDIA_APEX_TREE_SHA256", "ASCEND_APEX_COMMIT", "ASCEND_APEX_TREE_SHA256"):
        m = re.search(rf"^{name}=(\S+)$", tool, re.M)
        assert m and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", m.group(1)), name
        assert arg_default(name) == m.group(1), f"{name}: Dockerfile {arg_default(name)} vs tool {m.group(1)}"


def test_apex_digest_is_content_based(tmp_path):
    tree = tmp_path / "t"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "x.py").write_text("x = 1\n")
    (tree / "setup.py").write_text("print()\n")
    tool = [str(REPO / "tools" / "apex_sources.sh"), "digest"]
    first = subprocess.run([*tool, str(tree)], capture_output=True, text=True, check=True).stdout.strip()
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(tree), str(copy)], check=True)
    assert subprocess.run([*tool, str(copy)], capture_output=True, text=True, check=True).stdout.strip() == first
    (copy / "setup.py").write_text("print(1)\n")
    assert subprocess.run([*tool, str(copy)], capture_output=True, text=True, check=True).stdout.strip() != first


# --------------------------------------------------------------------------- entrypoint


def _fake_ascend(root: Path, log: Path, *, nnal: bool = True) -> None:
    scripts = ["ascend-toolkit/set_env.sh", "cann-9.1.0/share/info/ascendnpu-ir/bin/set_env.sh"]
    if nnal:
        scripts.append("nnal/atb/set_env.sh")
    for rel in scripts:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'echo "{rel} $*" >> {log}\n')


def _entrypoint(tmp_path: Path, root: Path, *args: str, env: dict | None = None):
    fake_py = tmp_path / "python"
    fake_py.write_text('#!/bin/sh\necho "python $*"\n')
    fake_py.chmod(0o755)
    given = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND", "ATB_"))}
    env.update(ASCEND_ROOT=str(root), CANN_VERSION="9.1.0", HARNESS_PYTHON=str(fake_py), **given)
    return subprocess.run(["bash", str(REPO / "docker" / "ascend" / "entrypoint.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=30)


def test_entrypoint_sources_every_script_in_order_then_runs_the_harness(tmp_path):
    root, log = tmp_path / "Ascend", tmp_path / "sourced.log"
    _fake_ascend(root, log)
    proc = _entrypoint(tmp_path, root, "run", "--platform", "ascend")
    assert proc.returncode == 0, proc.stderr
    # the vendor's entrypoint's scripts, in its order (VENDOR_ENV_SCRIPTS), the last with the C++11 ABI
    assert log.read_text().splitlines() == ["ascend-toolkit/set_env.sh ",
                                            "cann-9.1.0/share/info/ascendnpu-ir/bin/set_env.sh ",
                                            "nnal/atb/set_env.sh --cxx_abi=1"]
    assert [line.split()[0].removeprefix("cann-9.1.0/") for line in log.read_text().splitlines()] == list(
        VENDOR_ENV_SCRIPTS)
    assert proc.stdout.strip() == "python -m harness run --platform ascend"
    log.unlink()
    assert _entrypoint(tmp_path, root, env={"ATB_CXX_ABI": "0"}).returncode == 0  # a caller's ABI is passed on
    assert log.read_text().splitlines()[-1] == "nnal/atb/set_env.sh --cxx_abi=0"


def test_entrypoint_skips_a_missing_script_and_says_so(tmp_path):
    root, log = tmp_path / "Ascend", tmp_path / "sourced.log"
    _fake_ascend(root, log, nnal=False)
    proc = _entrypoint(tmp_path, root)
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 2
    assert "nnal/atb/set_env.sh not found; skipped" in proc.stderr
    assert proc.stdout.strip() == "python -m harness --help"


# --------------------------------------------------------------------------- reproduce.sh


@pytest.mark.parametrize("fixture, chip", [("910prob_info.txt", "910"), ("910b3_info.txt", "910b")])
def test_dry_run_reads_the_chip_from_npu_smi_and_builds_for_it(tmp_path, fixture, chip):
    proc = ascend_dry_run(tmp_path, fixture)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    name = {"910": "910ProB", "910b": "910B3"}[chip]
    assert lines[0] == (f"# ascend chip: {chip} (npu-smi info: {name} x8); "
                        f"base image: quay.io/ascend/cann:9.1.0-{chip}-ubuntu22.04-py3.11")
    build = shlex.split(next(line for line in lines if " build -f " in line))
    assert build[build.index("-t") + 1] == f"ms-pt-harness:ascend-{chip}"
    assert f"ASCEND_CHIP={chip}" in build and build[build.index("--build-arg") - 1] == f"ms-pt-harness:ascend-{chip}"
    run_cmd = shlex.split(next(line for line in lines if "--platform ascend" in line))
    devices = {run_cmd[i + 1] for i, a in enumerate(run_cmd) if a == "--device"}
    mounts = {run_cmd[i + 1] for i, a in enumerate(run_cmd) if a == "-v"}
    assert set(VENDOR_DEVICES) <= devices and {f"/dev/davinci{n}" for n in range(8)} <= devices
    for mount in VENDOR_MOUNTS:
        assert f"{mount}:ro" in mounts, mount
    assert run_cmd[run_cmd.index(f"ms-pt-harness:ascend-{chip}") + 1] == "run"


@pytest.mark.parametrize("fixture, shown", [("910_a3_info.txt", "Ascend910"), ("310p3_info.txt", "310P3")])
def test_chips_without_an_image_are_refused_in_one_line(tmp_path, fixture, shown):
    line = one_line_error(ascend_dry_run(tmp_path, fixture))
    assert line.startswith(f"reproduce.sh: chip {shown} (npu-smi info) has no image here"), line


def test_ascend_chip_overrides_npu_smi_and_is_checked(tmp_path):
    proc = ascend_dry_run(tmp_path, "910prob_info.txt", env={"ASCEND_CHIP": "910b"})
    assert proc.returncode == 0 and proc.stdout.startswith("# ascend chip: 910b (ASCEND_CHIP)"), proc.stderr
    line = one_line_error(ascend_dry_run(tmp_path, None, env={"ASCEND_CHIP": "950"}))
    assert "ASCEND_CHIP=950 is not a chip this image is built for" in line


def test_rootless_podman_keeps_the_callers_groups(tmp_path):
    proc = ascend_dry_run(tmp_path, "910b3_info.txt", engine="podman")
    assert proc.returncode == 0, proc.stderr
    run_cmd = shlex.split(next(line for line in proc.stdout.splitlines() if "--platform ascend" in line))
    assert run_cmd[run_cmd.index("--group-add") + 1] == "keep-groups" and "--userns=keep-id" in run_cmd


def test_lock_refusal_for_this_architecture_is_named_in_the_dry_run(tmp_path):
    arch = os.uname().machine
    refused = re.search(rf"^# LOCK-INCOMPLETE-ARCH {arch}: (.*)$", LOCK, re.M)
    proc = ascend_dry_run(tmp_path, "910b3_info.txt")
    assert proc.returncode == 0, proc.stderr
    assert ("requirements/ascend.txt is incomplete" in proc.stderr) == bool(refused)


def test_npu_smi_failure_as_non_root_records_the_reason(monkeypatch):
    from harness.telemetry.npusmi import NpuSmiSource
    from harness.telemetry.sampler import SourceUnavailable

    def refuse(args):
        raise RuntimeError("npu-smi info exited 255: dcmi module initialize failed")

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr("os.getgroups", lambda: [])
    with pytest.raises(SourceUnavailable) as e:
        NpuSmiSource(0, run=refuse).open()
    assert "running as uid 1000, not in the HwHiAiUser group" in str(e.value)
    assert "keep-groups" in str(e.value)
