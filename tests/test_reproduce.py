"""reproduce.sh: the commands it prints and the one-line errors it gives. No container engine, GPU or
NPU is needed: a fake /dev (HARNESS_DEV_DIR) and fake docker/podman scripts on PATH stand in."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers import REPO, ascend_dry_run, copy_reproduce, fake_engine, one_line_error
from tests.helpers import checkout_without_venv as _checkout_without_venv
from tests.helpers import engine_calls as calls
from tests.helpers import path_without_engines as _path_with_python
from tests.helpers import path_without_engines as _path_without_engines
from tests.helpers import run_reproduce as run

SCRIPT = REPO / "reproduce.sh"
ASCEND_MOUNTS = ("/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/:ro",
                 "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro", "/usr/local/dcmi:/usr/local/dcmi:ro")


def test_unknown_platform_is_refused(tmp_path):
    proc = run(tmp_path, "tpu")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "reproduce.sh: unknown platform 'tpu'; choose cpu, cuda or ascend"


def test_unknown_option_is_refused(tmp_path):
    proc = run(tmp_path, "cpu", "--turbo")
    assert proc.returncode == 2
    assert "unknown option '--turbo'" in proc.stderr.strip().splitlines()[-1]


def test_ascend_dry_run_prints_complete_commands_with_every_device_flag(tmp_path):
    out = tmp_path / "out"
    proc = run(tmp_path, "ascend", "--dry-run", "--out", out, "--only", "model/gcn/*")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    run_line = next(line for line in lines if " run " in line and "--platform ascend" in line)
    for n in range(8):  # no NPU here: the commands show an 8-NPU server, and say so on stderr
        assert f"--device /dev/davinci{n} " in run_line
    for flag in ("--device /dev/davinci_manager", "--device /dev/devmm_svm", "--device /dev/hisi_hdc",
                 *ASCEND_MOUNTS, "--shm-size 16g", f"-v {out}:/results",
                 "ms-pt-harness:ascend-910 run --platform ascend",
                 "--profile accelerator", "--out /results", "--only model/gcn/\\*"):   # an NPU host's default
        assert flag in run_line, flag
    assert any(line.endswith("ms-pt-harness:ascend-910 report /results") for line in lines)
    assert any(" build -f " in line and line.split(" build -f ")[1].startswith(f"{REPO}/Dockerfile.ascend")
               for line in lines), "an image that is not here must be built first"
    assert "8-NPU" in proc.stderr
    assert not out.exists(), "--dry-run must not create anything"


def test_ascend_dry_run_passes_exactly_the_npus_present(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("davinci0", "davinci3", "davinci_manager"):
        (dev / name).touch()
    proc = run(tmp_path, "ascend", "--dry-run", "--out", tmp_path / "o", dev=dev)
    assert proc.returncode == 0, proc.stderr
    run_line = next(line for line in proc.stdout.splitlines() if "--platform ascend" in line)
    assert "--device /dev/davinci0 " in run_line and "--device /dev/davinci3 " in run_line
    assert "/dev/davinci1 " not in run_line and "/dev/davinci7" not in run_line


def test_ascend_without_npus_exits_nonzero_with_one_line(tmp_path):
    line = one_line_error(run(tmp_path, "ascend"))
    assert line.startswith("reproduce.sh: no Ascend NPU visible")


def test_cuda_without_gpus_exits_nonzero_with_one_line(tmp_path):
    line = one_line_error(run(tmp_path, "cuda", "--full"))
    assert line.startswith("reproduce.sh: no NVIDIA GPU visible")


def test_cuda_dry_run_docker_uses_gpus_all(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker")
    proc = run(tmp_path, "cuda", "--dry-run", "--full", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    run_line = next(line for line in proc.stdout.splitlines() if "--platform cuda" in line)
    assert run_line.startswith("docker run ")
    for flag in ("--gpus all", "--shm-size 16g", "--profile full", "ms-pt-harness:cuda run",
                 f"-v {tmp_path}/o:/results"):
        assert flag in run_line, flag
    assert [c[0] for c in calls(tmp_path)] == ["info", "image"], "a dry run only asks, it runs nothing"


def test_cuda_dry_run_podman_uses_cdi_and_keeps_the_users_id(tmp_path):
    bin_dir = fake_engine(tmp_path, "podman")
    proc = run(tmp_path, "cuda", "--dry-run", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    run_line = next(line for line in proc.stdout.splitlines() if "--platform cuda" in line)
    assert run_line.startswith("podman run ")
    assert "--device nvidia.com/gpu=all" in run_line and "--userns=keep-id" in run_line
    # keep-id alone runs the image's USER (1000): the caller's own ids, or a caller other than uid 1000 cannot write
    # the run folder (seen under rootless podman 4.3)
    assert f"--user {os.getuid()}:{os.getgid()}" in run_line
    assert "--gpus" not in run_line


def test_cpu_defaults_to_native_and_container_on_request(tmp_path):
    native = run(tmp_path, "cpu", "--dry-run", "--out", tmp_path / "o")
    assert native.returncode == 0, native.stderr
    assert "-m harness run --platform cpu" in native.stdout and "docker" not in native.stdout
    container = run(tmp_path, "cpu", "--container", "--dry-run", "--out", tmp_path / "o")
    assert container.returncode == 0, container.stderr
    run_line = next(line for line in container.stdout.splitlines() if "--platform cpu" in line)
    assert "ms-pt-harness:cpu run --platform cpu" in run_line and "--device" not in run_line


def test_resume_of_a_folder_from_another_platform_is_refused(tmp_path):
    out = tmp_path / "earlier"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"schema": 1, "platform": "cpu", "profile": "quick"}, indent=1))
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "davinci0").touch()
    line = one_line_error(run(tmp_path, "ascend", "--resume", "--out", out, "--dry-run", dev=dev))
    assert "holds a cpu run, not ascend" in line
    assert json.loads((out / "run.json").read_text())["platform"] == "cpu"  # untouched


def test_resume_of_the_same_platform_is_passed_on(tmp_path):
    out = tmp_path / "earlier"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"platform": "cpu"}))
    proc = run(tmp_path, "cpu", "--resume", "--out", out, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "--resume" in proc.stdout


def test_no_container_engine_is_one_line(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "davinci0").touch()
    line = one_line_error(run(tmp_path, "ascend", "--out", tmp_path / "o", dev=dev,
                              path=_path_without_engines(tmp_path)))
    assert line.startswith("reproduce.sh: no container engine")


def test_engine_that_does_not_answer_is_no_engine(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker", answers=False)
    line = one_line_error(run(tmp_path, "cpu", "--container", "--out", tmp_path / "o",
                              path=f"{bin_dir}:{_path_without_engines(tmp_path)}"))
    assert line.startswith("reproduce.sh: no container engine")


def test_image_build_failure_ends_with_one_clear_line(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker", has_image=False, build_ok=False)
    proc = run(tmp_path, "cpu", "--container", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("reproduce.sh: building ms-pt-harness:cpu from Dockerfile.cpu failed")
    assert not any(c[0] == "run" for c in calls(tmp_path))


def test_container_run_then_report_with_mounts(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker")
    out, data = tmp_path / "o", tmp_path / "d"
    proc = run(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", out, "--data-dir", data,
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    runs = [c for c in calls(tmp_path) if c[0] == "run"]
    assert len(runs) == 3
    _fetch, harness_run, report = runs
    assert harness_run[harness_run.index("example/harness:1") + 1:][:3] == ["run", "--platform", "cpu"]
    assert f"{out}:/results" in harness_run and f"{data}:/data:ro" in harness_run
    assert report[-3:] == ["example/harness:1", "report", "/results"]
    assert f"report: {out}/report/report.html" in proc.stdout
    assert out.is_dir() and data.is_dir()


def test_a_report_folder_the_image_cannot_write_is_the_harness_line_alone(tmp_path):
    said = ("error: cannot write the report to /results/report/tables: the file system is read-only; make "
            "/results/report writable again (remount it read-write), or choose another report folder with --out "
            "(the run folders are unchanged)")
    bin_dir = fake_engine(tmp_path, "docker", report_error=said)
    proc = run(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", tmp_path / "o",
               "--data-dir", tmp_path / "d", path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 2 and one_line_error(proc) == said


def test_incomplete_lock_blocks_the_build_with_one_line(tmp_path):
    lock = (REPO / "requirements" / "cuda.txt").read_text()
    if "# LOCK-INCOMPLETE" not in lock:
        pytest.skip("requirements/cuda.txt is complete")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").touch()
    bin_dir = fake_engine(tmp_path, "docker", has_image=False)
    line = one_line_error(run(tmp_path, "cuda", "--out", tmp_path / "o", dev=dev,
                              path=f"{bin_dir}:{_path_without_engines(tmp_path)}"))
    assert "requirements/cuda.txt is incomplete" in line and "tools/lock_requirements.py --only cuda" in line
    assert not any(c[0] in ("build", "run") for c in calls(tmp_path))


@pytest.mark.parametrize("ci, code", [("", 0), ("true", 1)])
def test_check_image_without_its_tools_says_so_in_one_line(tmp_path, ci, code):
    """tools/check_image.sh where podman (which builds the CPU image through reproduce.sh) and debootstrap cannot be
    had: one line naming them; an error only under CI=true."""
    env = {**os.environ, "PATH": _path_without_engines(tmp_path), "CI": ci}
    proc = subprocess.run(["bash", str(REPO / "tools" / "check_image.sh")], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["check_image: skipped: no podman debootstrap on this host and no way to install it (needs root "
                     "and apt-get); install podman debootstrap to build the cpu image"], proc.stderr


def test_check_image_runs_a_cell_of_every_model_and_reads_every_dataset_in_the_image():
    """What ships in an image is tested in it: the CPU image's walk (tools/walk.sh --container, after the image is
    built by ./reproduce.sh cpu --container --build) runs the GCN glob and `harness list --one-per-model`'s cells
    (derived from the matrix, no list by hand): together a cell of every model of the matrix, both frameworks across
    them; tools/check_datasets.py covers every dataset, in the image as in the CUDA image's check."""
    import re

    from harness.config import matrix as matrix_mod

    sys.path.insert(0, str(REPO / "tools"))
    try:
        from check_datasets import DATASETS
    finally:
        sys.path.remove(str(REPO / "tools"))
    script = (REPO / "tools" / "check_image.sh").read_text()
    walk = (REPO / "tools" / "walk.sh").read_text()
    only = re.search(r"^slice='([^']+)'", walk, re.M).group(1)
    assert "run --rm ms-pt-harness:cpu list --profile quick --one-per-model" in walk
    assert re.search(r"^models=''", script, re.M) and "python -m harness list --profile quick --one-per-model" in script
    m = matrix_mod.load()
    models = m.data["models"]
    per_model = matrix_mod.one_per_model(m.expand("quick"))
    assert [c.model for c in per_model] == list(models) == ["gcn", "resnet50", "gru", "googlenet", "lstm", "bert"]
    assert all(c.kind == "model" and c.amp == "off" and c.devices == 1 for c in per_model)
    assert {c.framework for c in per_model} == {"pytorch", "mindspore"}
    assert {c.model for c in m.expand("quick", only)} == {"gcn"}
    assert set(DATASETS) == {spec["dataset"] for spec in models.values()}
    assert "inside python /tools/check_datasets.py" in script and 'run_cells models "$models"' in script
    assert "--entrypoint python ms-pt-harness:cpu" in walk and "/tools/check_datasets.py" in walk


@pytest.mark.parametrize("given, passed", [
    (["--synthetic"], ["--synthetic"]),
    (["--synthetic", "cifar10"], ["--data-dir", "DATA", "--download", "--synthetic", "cifar10"]),
    (["--synthetic=cifar10,multi30k"], ["--data-dir", "DATA", "--download", "--synthetic", "cifar10,multi30k"]),
    (["--synthetic", "--only", "model/gcn/*"], ["--synthetic", "--only", "model/gcn/*"]),
])
def test_synthetic_takes_the_harness_optional_dataset_list(tmp_path, given, passed):
    """--synthetic alone: every dataset generated; --synthetic NAMES: only those, the rest real from --data-dir."""
    data = tmp_path / "data"
    proc = run(tmp_path, "cpu", "--dry-run", "--out", tmp_path / "o", "--data-dir", data, *given)
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(next(ln for ln in proc.stdout.splitlines() if " -m harness run " in ln))
    tail = argv[argv.index("--out") + 2:]
    assert tail == [str(data) if a == "DATA" else a for a in passed]


@pytest.mark.parametrize("platform, last", [
    ("cuda", "reproduce.sh: no NVIDIA GPU visible (nvidia-smi -L lists none, no {dev}/nvidia[0-9]*); run on a GPU "
             "host with the NVIDIA driver and container toolkit, or choose cpu"),
    ("ascend", "reproduce.sh: no Ascend NPU visible (no {dev}/davinci[0-9]*); run on an Ascend host with its driver "
               "installed, or choose cpu"),
])
def test_check_without_the_device_prints_what_it_could_and_ends_with_the_no_device_line(tmp_path, platform, last):
    proc = run(tmp_path, platform, "--check", path=_path_with_python(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == last.format(dev=tmp_path / "dev")
    assert all(line.startswith("reproduce.sh: ") for line in lines)
    assert any(line.startswith("reproduce.sh: no container engine") for line in lines)  # what it could check
    table = proc.stdout.splitlines()
    assert table[2].split() == ["check", "found", "needed", "verdict"]
    assert any(line.startswith("free disk") for line in table), proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not calls(tmp_path), "no engine was there to call"


def test_check_is_in_the_usage_of_the_script_and_the_readme():
    help_text = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True).stderr
    assert "--check" in help_text.splitlines()[2] and "  --check " in help_text
    usage = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("`./reproduce.sh "))
    assert "[--check]" in usage


@pytest.mark.parametrize("host, python3, said", [
    ("Ubuntu 22.04", "3.10.12", "{py} is Python 3.10.12, and the lock pins wheels for Python 3.11"),
    ("Ubuntu 24.04", "3.12.3", "{py} is Python 3.12.3, and the lock pins wheels for Python 3.11"),
    ("a PYTHON that does not run", "PYTHON", "{py} does not run"),
    ("RHEL 8", "3.6", "no python3 found that runs harness/preflight (3.8 or newer), and the lock pins wheels for "
                      "Python 3.11"),
    ("no Python", None, "no python3 found, and the lock pins wheels for Python 3.11"),
])
def test_a_host_without_python_3_11_is_pointed_at_container(tmp_path, host, python3, said):
    """The CPU image needs no host Python: the line that stops a fresh `./reproduce.sh cpu` says so (the base Python's
    check is harness/preflight/venvbuild.py's, run by that Python, or by the host's python3 where it does not run)."""
    path = _path_without_engines(tmp_path, python3=False)
    fake = Path(path) / "python3"
    env = {"PATH": path, "HOME": str(tmp_path)}
    if python3:  # a stock python3 of that release (and no python3.11): it says its version, and runs harness/preflight
        real = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        version = "" if python3 == "PYTHON" else f'*"version_info[:3]"*) echo {python3}; exit 0 ;; '
        old = '*"(3, 8)"*) exit 1 ;; ' if python3 == "3.6" else ""   # too old for harness/preflight
        fake.write_text(f'#!/bin/sh\ncase "$*" in {old}{version}*) exec {real} "$@" ;; esac\n')
        fake.chmod(0o755)
    if python3 == "PYTHON":
        fake, env["PYTHON"] = tmp_path / "no-such-python3.11", str(tmp_path / "no-such-python3.11")
    clone = _checkout_without_venv(tmp_path)
    proc = subprocess.run(["bash", str(clone / "reproduce.sh"), "cpu", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    line = one_line_error(proc)
    assert proc.returncode == 2
    assert line == (f"reproduce.sh: {said.format(py=fake)}; add --container to run in the CPU image (docker or "
                    f"podman; no host Python needed), or install Python 3.11 and set PYTHON=/path/to/python3.11")
    assert not (clone / ".venv").exists()


def test_rootful_podman_passes_the_callers_ids_not_keep_id(tmp_path):
    """Rootful podman refuses keep-id ("keep-id is only supported in rootless mode", podman 4.3): the caller's ids go
    with --user, as with docker; SELinux labels are off for every podman run."""
    bin_dir = fake_engine(tmp_path, "podman", rootless=False)
    proc = run(tmp_path, "cpu", "--container", "--dry-run", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    run_line = next(line for line in proc.stdout.splitlines() if "--platform cpu" in line)
    assert f"--user {os.getuid()}:{os.getgid()}" in run_line and "keep-id" not in run_line
    assert "--security-opt=label=disable" in run_line


def test_container_data_is_fetched_first_then_mounted_read_only(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker")
    out, data = tmp_path / "o", tmp_path / "d"
    proc = run(tmp_path, "cpu", "--container", "--image", "example/harness:1", "--out", out, "--data-dir", data,
               "--only", "model/gcn/*", path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    fetch, harness_run, _ = [c for c in calls(tmp_path) if c[0] == "run"]
    assert fetch[fetch.index("example/harness:1") + 1:] == ["fetch", "--profile", "quick", "--only", "model/gcn/*",
                                                             "--data-dir", "/data"]
    assert f"{data}:/data" in fetch and f"{data}:/data:ro" in harness_run
    assert "--download" not in harness_run


def test_build_builds_the_image_and_stops_with_the_next_step(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker", has_image=False)
    proc = run(tmp_path, "cpu", "--container", "--build", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_with_python(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    assert [c[0] for c in calls(tmp_path) if c[0] in ("build", "run")] == ["build"]
    err = proc.stderr
    assert "reproduce.sh: --build makes the image of Dockerfile.cpu: downloads " in err  # said before it starts
    assert "reproduce.sh: built ms-pt-harness:cpu in 0 min " in err  # measured after
    assert err.strip().splitlines()[-1] == ("reproduce.sh: next: ./reproduce.sh cpu --container --check (the training "
                                            "steps, seconds), then ./reproduce.sh cpu --container to run the quick "
                                            "profile")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("platform", ["cuda", "ascend"])
def test_build_needs_no_device(tmp_path, platform):
    """A GPU or NPU host's image can be built before the device is there (or while it is busy)."""
    bin_dir = fake_engine(tmp_path, "docker", has_image=False)
    proc = run(tmp_path, platform, "--build", "--out", tmp_path / "o", path=f"{bin_dir}:{_path_with_python(tmp_path)}",
               env={"ASCEND_CHIP": "910b"})
    if platform == "ascend" and "LOCK-INCOMPLETE" in (REPO / "requirements" / "ascend.txt").read_text():
        assert "requirements/ascend.txt is incomplete" in one_line_error(proc)
        return
    assert proc.returncode == 0, proc.stderr
    assert [c[0] for c in calls(tmp_path) if c[0] in ("build", "run")] == ["build"]


def test_build_dry_run_prints_the_build_alone(tmp_path):
    bin_dir = fake_engine(tmp_path, "docker")
    proc = run(tmp_path, "cpu", "--container", "--build", "--dry-run", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("docker build -f ")
    native = run(tmp_path, "cpu", "--build", "--dry-run", "--out", tmp_path / "o")
    assert native.returncode == 0, native.stderr
    assert " -m venv " in native.stdout and "pip install" in native.stdout and "harness run" not in native.stdout


def test_check_on_a_fresh_clone_is_ready_to_build(tmp_path):
    """No .venv yet is where a fresh host stands, not a failure: --check exits 0 and names the next step."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "harness", clone / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    copy_reproduce(clone)
    (clone / "requirements").mkdir()
    shutil.copy(REPO / "requirements" / "cpu.txt", clone / "requirements" / "cpu.txt")
    proc = subprocess.run(["bash", str(clone / "reproduce.sh"), "cpu", "--check"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "PATH": _path_with_python(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split("  ")[0]: line for line in proc.stdout.splitlines()}
    assert rows[".venv"].rstrip().endswith("not built")
    assert rows["training step: PyTorch"].rstrip().endswith("not built")
    assert proc.stdout.strip().splitlines()[-1] == (
        "ready to build: next, ./reproduce.sh cpu --build (it builds and stops), then ./reproduce.sh cpu --check "
        "again to run the training steps")


def test_ci_walks_the_reviewers_path_under_real_runtimes():
    """tox -e main walks pristine Debian hosts (tools/pristine.sh) and cuda/ascend up to their device line; tox -e
    image hands the built CPU image to rootless podman and docker, and the CUDA image's run line to podman
    (tools/check_engines.sh), and the test command installs both runtimes; the CI-only runtime settings never reach a
    reviewer's command."""
    main = (REPO / "tools" / "check_main.sh").read_text()
    assert "tools/pristine.sh || failed+=(pristine)" in main and 'tools/walk.sh "$platform"' in main
    image = (REPO / "tools" / "check_image.sh").read_text()
    assert '"$root/tools/check_engines.sh" cpu ' in image
    assert '"$root/tools/check_engines.sh" cuda "$image"' in image
    packages = (REPO / "tools" / "install_system_packages.sh").read_text()
    assert "need+=(podman)" in packages and "need+=(docker.io)" in packages
    engines = (REPO / "tools" / "check_engines.sh").read_text()
    assert 'export CONTAINERS_CONF="$root/tools/ci/containers.conf"' in engines
    for name in ("reproduce.sh", "tools/reproduce/native.sh", "tools/reproduce/container.sh", "README.md",
                 "ARTIFACT.md"):
        text = (REPO / name).read_text()
        assert "containers.conf" not in text and "--ulimit" not in text, name


def test_the_help_gives_each_profiles_max_repeats_as_the_matrix_does():
    from harness.config import matrix as matrix_mod

    help_text = " ".join(subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True).stderr.split())
    m = matrix_mod.load()
    for profile in ("quick", "target", "accelerator"):
        cap = m.max_repeats(profile, None, None)
        assert re.search(rf"\b{cap} for [a-z ,]*\b{profile}\b", help_text), (profile, cap)


@pytest.mark.parametrize("name", ["reproduce.sh", "tools/wheelhouse.sh", "tools/apex_sources.sh", "tools/test.sh"])
def test_every_entry_script_reports_an_unforeseen_failure_and_the_usage_says_its_codes(name):
    """set -e alone ends a script in silence: each one traps ERR (functions too: -E) into the one line of
    tools/unexpected.sh and exit 3 (tests/test_script_failures.py plants such failures); the usage gives the codes."""
    text = (REPO / name).read_text()
    assert "\nset -Eeuo pipefail\n" in text and "/unexpected.sh\"\n" in text
    shown = name if name == "tools/test.sh" else Path(name).name
    assert f"\ntrap 'unexpected $? $LINENO \"$BASH_COMMAND\" {shown} " in text
    if name == "reproduce.sh":
        help_text = " ".join(subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True)
                             .stderr.split())
        assert ("exit status: 0 done; 1 the run finished but a cell failed (the report says which), or its report "
                "could not be rendered; 2 refused") in help_text


# --- what the script asks harness/preflight/shell.py: the devices and the Ascend chip, under the host's python3 -------


@pytest.mark.parametrize("platform", ["cuda", "ascend"])
def test_a_gpu_or_npu_host_without_python3_is_one_line(tmp_path, platform):
    bin_dir = fake_engine(tmp_path, "docker")
    line = one_line_error(run(tmp_path, platform, "--dry-run", "--out", tmp_path / "o",
                              path=f"{bin_dir}:{_path_without_engines(tmp_path, python3=False)}"))
    assert line == f"reproduce.sh: {platform} needs python3 (3.8 or newer) to run harness/preflight; install it"
    assert not calls(tmp_path)


def test_the_cpu_image_and_a_cpu_dry_run_need_no_host_python(tmp_path):
    """README: `./reproduce.sh cpu --container` needs docker or podman, no host Python."""
    bin_dir = fake_engine(tmp_path, "docker")
    path = f"{bin_dir}:{_path_without_engines(tmp_path, python3=False)}"
    container = run(tmp_path, "cpu", "--container", "--dry-run", "--out", tmp_path / "o", path=path)
    assert container.returncode == 0 and "ms-pt-harness:cpu run --platform cpu" in container.stdout, container.stderr
    native = run(tmp_path, "cpu", "--dry-run", "--out", tmp_path / "o", path=path)
    assert native.returncode == 0 and " -m harness run --platform cpu " in native.stdout, native.stderr


def _one_npu(tmp_path: Path, has_image: bool = False) -> tuple[Path, str]:
    """A host with one NPU (/dev/davinci0) and a stand-in docker (with or without the image): (dev, PATH)."""
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    (dev / "davinci0").touch()
    return dev, f"{fake_engine(tmp_path, 'docker', has_image=has_image)}:{_path_without_engines(tmp_path)}"


def _ascend_dry_run(tmp_path: Path, chip: str):
    dev, path = _one_npu(tmp_path)
    return run(tmp_path, "ascend", "--dry-run", "--out", tmp_path / "o", dev=dev, path=path,
               env={"ASCEND_CHIP": chip})


@pytest.mark.parametrize("chip", sorted(tomllib.loads((REPO / "harness/preflight/ascend.toml").read_text())["chip"]))
def test_each_chip_of_ascend_toml_is_an_image_the_script_builds(tmp_path, chip):
    """The chips the script takes are ascend.toml's (it keeps no list of its own): each builds its own image."""
    proc = _ascend_dry_run(tmp_path, chip)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"# ascend chip: {chip} (ASCEND_CHIP); base image: ") and f"-{chip}-" in lines[0]
    build = shlex.split(next(line for line in lines if " build -f " in line))
    assert build[build.index("-t") + 1] == f"ms-pt-harness:ascend-{chip}" and f"ASCEND_CHIP={chip}" in build
    assert any(f"ms-pt-harness:ascend-{chip} run --platform ascend " in line for line in lines)


def test_a_chip_outside_ascend_toml_is_refused_in_one_line(tmp_path):
    assert one_line_error(_ascend_dry_run(tmp_path, "910c")) == (
        "reproduce.sh: ASCEND_CHIP=910c is not a chip this image is built for; choose 910 (Ascend 910) or 910b "
        "(Atlas A2)")
    assert not calls(tmp_path)


def test_without_npu_smi_only_a_dry_run_goes_on_with_the_910(tmp_path):
    """No npu-smi: the chip is unknown; the commands may be printed for the 910, the image not built for a guess."""
    dev, path = _one_npu(tmp_path)
    dry = run(tmp_path, "ascend", "--dry-run", "--out", tmp_path / "o", dev=dev, path=path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("# ascend chip: 910 (no npu-smi on this host: the Ascend 910 default); base image: ")
    line = one_line_error(run(tmp_path, "ascend", "--out", tmp_path / "o", dev=dev, path=path))
    assert line == ("reproduce.sh: npu-smi not found, so the chip (and the image's base) is unknown; install the "
                    "Ascend driver's tools, or set ASCEND_CHIP=910 or 910b")
    assert [c[0] for c in calls(tmp_path) if c[0] in ("build", "run")] == []


def test_a_question_python_cannot_answer_is_an_unexpected_failure_after_its_output(tmp_path):
    """A python3 that passes the version check and then fails: exit 3, with the line, after what it printed."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "python3").write_text('#!/bin/sh\ncase "$1" in -c) exit 0 ;; esac\necho "Traceback: it failed" >&2\n'
                                    "exit 1\n")
    (broken / "python3").chmod(0o755)
    out = tmp_path / "o"
    proc = run(tmp_path, "cuda", "--dry-run", "--out", out,
               path=f"{broken}:{_path_without_engines(tmp_path, python3=False)}")
    assert proc.returncode == 3
    first, last = proc.stderr.strip().splitlines()
    assert first == "Traceback: it failed"
    assert re.fullmatch(r"reproduce\.sh: unexpected failure at line \d+: return \"\$rc\" \(exit 1\); report it, with "
                        rf"the command line \(\./reproduce\.sh cuda --dry-run --out {re.escape(str(out))}\) and the "
                        r"output above", last), last


# --- the Ascend image's apex choice, and the hours booked -------------------------------------------------------------


def _build_args(proc) -> dict[str, str]:
    build = shlex.split(next(line for line in proc.stdout.splitlines() if " build -f " in line))
    return dict(build[i + 1].split("=", 1) for i, a in enumerate(build) if a == "--build-arg")


@pytest.mark.parametrize("given, env, passed", [
    ([], {}, None),                                   # the Dockerfile's default (skip), unnamed
    (["--apex", "build"], {}, "build"),
    (["--apex", "skip"], {}, "skip"),
    ([], {"ASCEND_APEX": "build"}, "build"),
    (["--apex", "skip"], {"ASCEND_APEX": "build"}, "skip"),   # the option over the environment
])
def test_the_apex_choice_reaches_the_ascend_image_build(tmp_path, given, env, passed):
    proc = ascend_dry_run(tmp_path, "910b3_info.txt", *given, env=env)
    assert proc.returncode == 0, proc.stderr
    assert _build_args(proc).get("ASCEND_APEX") == passed


@pytest.mark.parametrize("given, env, said", [
    (["--apex", "wheel"], {}, "--apex wheel is not an apex choice"),
    ([], {"ASCEND_APEX": "Build"}, "ASCEND_APEX=Build is not an apex choice"),
])
def test_a_bad_apex_choice_is_one_line(tmp_path, given, env, said):
    proc = ascend_dry_run(tmp_path, "910b3_info.txt", *given, env=env)
    assert proc.returncode == 2
    assert one_line_error(proc) == (f"reproduce.sh: {said}; choose build (Ascend's apex, after tools/apex_sources.sh "
                                    "fetch) or skip")
    assert not calls(tmp_path)


@pytest.mark.parametrize("platform, extra, said", [
    ("cpu", [], "--apex is for the Ascend image only; drop it, or choose ascend"),
    ("cuda", [], "--apex is for the Ascend image only; drop it, or choose ascend"),
    ("ascend", ["--native"], "--native runs without a container; drop --image/--build/--apex, or drop --native"),
])
def test_apex_where_no_ascend_image_is_built_is_refused(tmp_path, platform, extra, said):
    proc = run(tmp_path, platform, "--dry-run", "--out", tmp_path / "o", "--apex", "build", *extra)
    assert proc.returncode == 2 and one_line_error(proc) == f"reproduce.sh: {said}"


def test_an_image_built_without_the_chosen_apex_is_built_again(tmp_path):
    """The image's label io.ms-pt-harness.apex says which choice built it (the stand-in engine's image has none)."""
    dev, path = _one_npu(tmp_path, has_image=True)
    kept = run(tmp_path, "ascend", "--dry-run", "--out", tmp_path / "o", dev=dev, path=path, env={"ASCEND_CHIP": "910"})
    assert kept.returncode == 0 and " build -f " not in kept.stdout, kept.stderr   # no choice: the image is kept
    again = run(tmp_path, "ascend", "--dry-run", "--apex", "build", "--out", tmp_path / "o", dev=dev, path=path,
                env={"ASCEND_CHIP": "910"})
    assert again.returncode == 0, again.stderr
    assert _build_args(again)["ASCEND_APEX"] == "build"
    assert ("reproduce.sh: ms-pt-harness:ascend-910 was built without an io.ms-pt-harness.apex label; building it "
            "again with ASCEND_APEX=build") in again.stderr


def test_the_help_names_the_apex_choice_and_the_hours():
    help_text = " ".join(subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True).stderr.split())
    assert "--apex build|skip ascend only:" in help_text and "ASCEND_APEX (build or skip, as --apex)" in help_text
    assert "--hours H the hours booked on this host (a positive number" in help_text
    assert "HARNESS_BOOKING_START (when the booking began" in help_text
    with_build_arg = (REPO / "Dockerfile.ascend").read_text()
    assert "ARG ASCEND_APEX=skip" in with_build_arg and '"$ASCEND_APEX" != build' in with_build_arg


def test_hours_are_passed_to_the_native_run(tmp_path):
    proc = run(tmp_path, "cpu", "--dry-run", "--hours", "2.5", "--out", tmp_path / "o")
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(next(ln for ln in proc.stdout.splitlines() if " -m harness run " in ln))
    assert argv[argv.index("--hours") + 1] == "2.5"
    assert "--hours" not in next(ln for ln in proc.stdout.splitlines() if " -m harness report " in ln)


@pytest.mark.parametrize("start", [None, "1700000000"])
def test_hours_and_the_booking_start_reach_the_container_run(tmp_path, start):
    bin_dir = fake_engine(tmp_path, "docker")
    env = {} if start is None else {"HARNESS_BOOKING_START": start}
    before = int(subprocess.run(["date", "+%s"], capture_output=True, text=True).stdout)
    proc = run(tmp_path, "cpu", "--container", "--dry-run", "--hours", "8", "--out", tmp_path / "o",
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    run_line = next(ln for ln in lines if "--platform cpu" in ln)
    argv = shlex.split(run_line)
    assert argv[argv.index("ms-pt-harness:cpu") + 1:][:3] == ["run", "--platform", "cpu"]
    assert argv[argv.index("--hours") + 1] == "8"
    booked = [a.split("=", 1)[1] for a in argv if a.startswith("HARNESS_BOOKING_START=")]
    assert len(booked) == 1 and argv[argv.index(f"HARNESS_BOOKING_START={booked[0]}") - 1] == "-e"
    if start is None:   # when the command began
        assert before <= int(booked[0]) <= before + 60
    else:
        assert booked == [start]
    others = [ln for ln in lines if ln is not run_line]
    assert not any("HARNESS_BOOKING_START" in ln or "--hours" in ln for ln in others)


@pytest.mark.parametrize("hours", ["0", "0.0", "-1", "abc", "1e3", "2h", "1.2.3", "."])
def test_hours_that_are_not_a_positive_number_are_one_line(tmp_path, hours):
    proc = run(tmp_path, "cpu", "--dry-run", "--hours", hours, "--out", tmp_path / "o")
    assert proc.returncode == 2
    assert one_line_error(proc) == ("reproduce.sh: --hours needs the hours booked, a positive number (e.g. --hours 8 "
                                    "or --hours 2.5)")


def test_hours_without_a_value_is_one_line(tmp_path):
    assert "--hours needs the hours booked" in one_line_error(run(tmp_path, "cpu", "--dry-run", "--hours"))


def test_ascend_apex_in_the_environment_leaves_a_native_run_alone(tmp_path):
    proc = run(tmp_path, "ascend", "--native", "--dry-run", "--out", tmp_path / "o", env={"ASCEND_APEX": "build"})
    assert proc.returncode == 0, proc.stderr
    assert " -m harness run --platform ascend " in proc.stdout and "ASCEND_APEX" not in proc.stdout
