"""The preflight (`./reproduce.sh PLATFORM --check`, harness/preflight) against recorded hosts: a V100 on R470 and
R535, H100s with podman+CDI and with docker lacking the NVIDIA Container Toolkit, a host without nvidia-smi, an
Ascend 910 with an old HDK and a 910B with HDK 25.2 (tests/fixtures/preflight/, layouts from public outputs).
Each expected verdict is asserted exactly, and each failure line must name its fix."""

import copy
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.preflight import FAIL, NEXT, NOTE, PASS, SKIP, checks_cuda, data, minitoml, parse, render, step, versions
from harness.preflight import __main__ as pf
from harness.preflight.host import Host, Output
from tests.conftest import REPO

HOSTS = REPO / "tests" / "fixtures" / "preflight"
CUDA, STACKS, HOSTDATA = data.cuda(), data.ascend(), data.host()


def host(name: str) -> Host:
    return Host.from_folder(HOSTS / name)


def rows_of(h: Host) -> dict:
    return {r.check: r for r in pf.evaluate(h, CUDA, STACKS, HOSTDATA)}


def verdicts(h: Host) -> dict:
    return {k: r.verdict for k, r in rows_of(h).items()}


def check(h: Host, prefix: str):
    return next(r for k, r in rows_of(h).items() if k.startswith(prefix))


def main(capsys, platform: str, name: str):
    code = pf.main([platform, "--host-dir", str(HOSTS / name)])
    out = capsys.readouterr()
    return code, out.out, out.err.strip().splitlines()


PT_DRIVER, MS_DRIVER = "driver for PyTorch", "driver for MindSpore"
PT_CODE, MS_CODE = "GPU code in PyTorch", "GPU code in MindSpore"
EXPECTED = {
    # host: (platform, exit code, {row prefix: verdict}, [substrings of the failure lines])
    "v100-r470": ("cuda", 2, {PT_DRIVER: FAIL, MS_DRIVER: NOTE, "driver branch": PASS, PT_CODE: PASS,
                              MS_CODE: PASS, "GPU access": PASS, "training step: PyTorch": FAIL,
                              "training step: MindSpore": PASS},
                  ["needs NVIDIA driver 525.60.13 or newer", "this host has 470.182.03",
                   "install NVIDIA driver 560.35.03 or newer, on branch R580 or older",
                   "The NVIDIA driver on your system is too old"]),
    "v100-r535": ("cuda", 0, {PT_DRIVER: NOTE, MS_DRIVER: PASS, "driver branch": PASS, PT_CODE: PASS, MS_CODE: PASS,
                              "GPU access": PASS, "image (": PASS, "training step: PyTorch": PASS}, []),
    "h100-r570-podman": ("cuda", 0, {PT_DRIVER: PASS, MS_DRIVER: PASS, PT_CODE: PASS, MS_CODE: NOTE,
                                     "GPU access": PASS, "image build": NOTE, "container engine": PASS}, []),
    "h100-docker-no-toolkit": ("cuda", 2, {PT_DRIVER: PASS, "GPU access": FAIL, "training step: PyTorch": FAIL},
                               ["without the NVIDIA Container Toolkit",
                                "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
                                'could not select device driver "" with capabilities: [[gpu]]']),
    "no-nvidia-smi": ("cuda", 2, {"NVIDIA GPU": FAIL, PT_DRIVER: SKIP, "container engine": FAIL,
                                  "training step: PyTorch": SKIP},
                      ["no container engine", "no NVIDIA GPU visible"]),
    "910-old-hdk": ("ascend", 2, {"NPU device files": PASS, "device access": PASS, "npu-smi": PASS, "NPU chip": PASS,
                                  # ascend.toml: no published minimum firmware was found, so it is not checked
                                  "HDK driver": FAIL, "HDK firmware": NOTE},
                    ["CANN 9.1.0 needs HDK 25.2.0 or newer; this host's driver is 23.0.5",
                     "install the Ascend HDK 25.2.0+ driver and firmware"]),
    "910b-hdk-25.2": ("ascend", 0, {"NPU chip": PASS, "HDK driver": PASS, "HDK firmware": NOTE,
                                    "training step: PyTorch + torch_npu": PASS, "training step: MindSpore": PASS}, []),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_host_verdicts_and_fix_lines(capsys, name):
    platform, code, want, lines = EXPECTED[name]
    got_code, out, err = main(capsys, platform, name)
    got = verdicts(host(name))
    for prefix, verdict in want.items():
        match = [v for k, v in got.items() if k.startswith(prefix)]
        assert match == [verdict], f"{name}: {prefix}: {match} (all: {got})"
    assert got_code == code, out + "\n".join(err)
    assert ("check" in out.splitlines()[2]) and "verdict" in out.splitlines()[2], out
    assert len(err) == sum(v == FAIL for v in got.values()), err
    for text in lines:
        assert any(text in line for line in err), f"{text!r} in none of {err}"
    assert all(line.startswith("preflight: ") for line in err)
    assert "Traceback" not in out + "".join(err)


def test_the_no_device_line_comes_last(capsys):
    _, _, err = main(capsys, "cuda", "no-nvidia-smi")
    assert err[-1] == ("preflight: no NVIDIA GPU visible (nvidia-smi -L lists none, no /dev/nvidia[0-9]*); run on a "
                       "GPU host with the NVIDIA driver and container toolkit, or choose cpu")


def test_r470_gets_compute_capability_by_name_and_r535_asks_for_it():
    gs, _ = checks_cuda.gpus(host("v100-r470"), CUDA)
    assert {(g["name"], g["compute_cap"], g.get("cc_by_name")) for g in gs} == {("Tesla V100-SXM2-16GB", "7.0", True)}
    gs, _ = checks_cuda.gpus(host("v100-r535"), CUDA)
    assert {(g["compute_cap"], g["driver_version"], g.get("cc_by_name")) for g in gs} == {("7.0", "535.183.01", None)}


@pytest.mark.parametrize("driver, pytorch, mindspore", [
    ("560.35.03", PASS, PASS), ("560.28.03", NOTE, PASS), ("525.60.13", NOTE, PASS), ("525.60.12", FAIL, PASS),
    ("520.61.05", FAIL, PASS), ("520.61.04", FAIL, NOTE), ("450.80.02", FAIL, NOTE), ("450.80.01", FAIL, FAIL),
])
def test_driver_boundaries_come_from_cuda_toml(driver, pytorch, mindspore):
    h = host("v100-r535")
    h.outputs["nvidia-smi-query"] = Output(0, f"Tesla V100-SXM2-32GB, 7.0, {driver}, 32768 MiB\n")
    assert (check(h, PT_DRIVER).verdict, check(h, MS_DRIVER).verdict) == (pytorch, mindspore)


def test_a_driver_past_r580_fails_a_volta_host_and_passes_an_h100():
    h = host("v100-r535")
    h.outputs["nvidia-smi-query"] = Output(0, "Tesla V100-SXM2-32GB, 7.0, 590.44.01, 32768 MiB\n")
    row = check(h, "driver branch")
    assert row.verdict == FAIL and "install a 580.xx driver" in row.fix and "Volta" in row.fix
    h.outputs["nvidia-smi-query"] = Output(0, "NVIDIA H100 80GB HBM3, 9.0, 590.44.01, 81559 MiB\n")
    assert check(h, "driver branch").verdict == PASS


@pytest.mark.parametrize("cc, pytorch, mindspore", [
    ("7.0", (PASS, "sm_70"), (PASS, "sm_70")), ("8.6", (PASS, "sm_86"), (PASS, "sm_80")),
    ("8.9", (PASS, "sm_89"), (PASS, "sm_80")), ("9.0", (PASS, "sm_90"), (NOTE, "compute_86")),
    ("10.0", (FAIL, "no code"), (NOTE, "compute_86")), ("6.1", (PASS, "sm_60"), (PASS, "sm_61")),
    ("5.2", (PASS, "sm_50"), (FAIL, "no code")), ("3.7", (FAIL, "no code"), (FAIL, "no code")),
])
def test_gpu_code_machine_code_same_major_else_ptx(cc, pytorch, mindspore):
    for fw, (verdict, what) in (("pytorch", pytorch), ("mindspore", mindspore)):
        got = checks_cuda.code_for(cc, CUDA["frameworks"][fw]["sass"], CUDA["frameworks"][fw]["ptx"])
        assert got[0] == verdict and what in got[1], (fw, cc, got)


def test_old_docker_without_buildkit_fails_only_when_it_must_build():
    h = host("v100-r535")
    h.outputs["engine-info"].text = h.outputs["engine-info"].text.replace("Server Version: 26.1.4",
                                                                          "Server Version: 20.10.24")
    assert check(h, "image build").verdict == NOTE  # the image is there: nothing to build
    del h.outputs["image-inspect"]
    row = check(h, "image build")
    assert row.verdict == FAIL and "Docker Engine 23 or newer" in row.fix and "DOCKER_BUILDKIT=1" in row.fix
    h.facts["env"] = {"DOCKER_BUILDKIT": "1"}
    assert check(h, "image build").verdict == PASS
    row = check(h, "image (")
    assert row.verdict == NEXT and "next: ./reproduce.sh cuda --build builds" in row.note
    assert check(h, "training step: PyTorch").verdict == PASS  # recorded; a live run would not reach it


def test_podman_without_a_cdi_spec_says_how_to_generate_it():
    h = host("h100-r570-podman")
    h.facts["cdi_specs"] = []
    row = check(h, "GPU access")
    assert row.verdict == FAIL and "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in row.fix


def test_missing_image_is_the_next_step_not_a_failure(capsys):
    """A fresh GPU host has no image yet: the check passes what it can, says to build, and exits 0."""
    h = host("v100-r535")
    del h.outputs["image-inspect"], h.outputs["step-pytorch"], h.outputs["step-mindspore"]
    assert pf._why_no_step(h, CUDA) == "image ms-pt-harness:cuda not built"
    h.facts["step_not_run"] = dict.fromkeys(step.FRAMEWORKS, pf._why_no_step(h, CUDA))
    rows = pf.evaluate(h, CUDA, STACKS, HOSTDATA)
    assert {r.check: r.verdict for r in rows}["training step: MindSpore"] == NEXT
    assert all(r.ok() for r in rows)
    line = render.next_step(rows, "./reproduce.sh cuda", "accelerator")
    assert line == ("ready to build: next, ./reproduce.sh cuda --build (it builds and stops), then ./reproduce.sh "
                    "cuda --check again to run the training steps")
    h.outputs["image-inspect"] = Output(0, "[]")
    h.facts["step_not_run"] = {}
    h.outputs["step-pytorch"] = h.outputs["step-mindspore"] = Output(1, "RuntimeError: CUDA error")
    rows = pf.evaluate(h, CUDA, STACKS, HOSTDATA)
    assert not render.next_step(rows, "./reproduce.sh cuda", "accelerator")  # a failure: its own line says what to do


def test_too_little_disk_for_the_cuda_build_fails_with_the_measured_peak():
    h = host("v100-r535")
    del h.outputs["image-inspect"]
    h.facts["free_bytes"] = 20e9
    row = check(h, "free disk")
    assert row.verdict == FAIL and ">= 30 GB" in row.needed and "10.0 GB" in row.fix


def test_ascend_user_outside_hwhiaiuser_is_told_to_join_it():
    h = host("910b-hdk-25.2")
    h.facts["user"]["groups"] = ["users", "docker"]
    for state in h.facts["ascend_devices"].values():
        state["rw"] = False
    row = check(h, "device access")
    assert row.verdict == FAIL and "sudo usermod -aG HwHiAiUser $USER" in row.fix


def test_ascend_firmware_outside_the_drivers_range_fails():
    h = host("910b-hdk-25.2")
    h.facts["firmware_version_info"] = h.facts["firmware_version_info"].replace("Version=7.8.0.2.212",
                                                                                "Version=9.1.0.1.100")
    row = check(h, "HDK firmware")
    assert row.verdict == FAIL and "accepts firmware 7.0.0 to 8.9.9" in row.fix


def test_ascend_chip_without_an_image_and_forced_chip():
    h = host("910b-hdk-25.2")
    h.outputs["npu-smi-info"].text = (REPO / "tests/fixtures/npusmi/310p3_info.txt").read_text()
    row = check(h, "NPU chip")
    assert row.verdict == FAIL and "has no image here" in row.fix and "910b (910B1/910B2" in row.fix
    h.facts["env"] = {"ASCEND_CHIP": "910"}
    assert check(h, "NPU chip").verdict == PASS
    h.facts["env"] = {"ASCEND_CHIP": "310p"}
    assert "not a chip this image is built for" in check(h, "NPU chip").fix


def test_ascend_x86_64_with_an_incomplete_lock_cannot_build():
    h = host("910b-hdk-25.2")
    del h.outputs["image-inspect"]
    h.facts["lock_incomplete"] = "torch 2.12.0+cpu x86_64 hash from one source only"
    row = check(h, "image (")
    assert row.verdict == FAIL and "tools/lock_requirements.py --only ascend" in row.fix
    h.facts["engine"] = None  # no engine to ask: the lock alone says this host cannot build it
    assert check(h, "image (").verdict == FAIL
    h.facts["lock_incomplete"] = None
    assert check(h, "image (").verdict == SKIP


# --- parsers, versions, data files ---------------------------------------------------------------------------------


def test_docker_and_podman_parsers_on_recorded_output():
    d = parse.docker_info((HOSTS / "v100-r470" / "engine-info.txt").read_text())
    assert d == {"server_version": "24.0.7", "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
                 "default_runtime": "runc", "root_dir": "/var/lib/docker", "buildx": "v0.20.0", "cdi_dirs": []}
    down = parse.docker_info("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.")
    assert down["server_version"] is None
    assert parse.podman_version((HOSTS / "h100-r570-podman" / "podman-version.txt").read_text()) == "4.9.3"
    graph = parse.podman_graph_root((HOSTS / "h100-r570-podman" / "engine-info.txt").read_text())
    assert graph == "/home/reviewer/.local/share/containers/storage"
    assert parse.nvidia_ctk_version((HOSTS / "v100-r470" / "nvidia-ctk.txt").read_text()) == "1.17.8"
    assert parse.buildx_version("github.com/docker/buildx v0.11.2 9872040") == "v0.11.2"


def test_nvidia_smi_parsers():
    assert parse.nvidia_smi_banner((HOSTS / "v100-r470" / "nvidia-smi.txt").read_text()) == \
        {"driver_version": "470.182.03", "cuda_version": "11.4"}
    assert parse.nvidia_smi_banner((HOSTS / "h100-r570-podman" / "nvidia-smi.txt").read_text()) == \
        {"driver_version": "570.124.06", "cuda_version": "12.8"}
    assert parse.unsupported_field((HOSTS / "v100-r470" / "nvidia-smi-query.txt").read_text())
    assert parse.nvidia_smi_query("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") == []


@pytest.mark.parametrize("path", sorted(glob.glob(str(REPO / "tests/fixtures/npusmi/*_info.txt"))))
def test_npu_smi_names_agree_with_the_telemetry_parser(path):
    from harness.telemetry.npusmi import parse_info

    text = Path(path).read_text()
    ours, theirs = parse.npu_smi_info(text), parse_info(text)
    assert ours["names"] == [c["name"] for c in theirs["chips"]] and ours["version"] == theirs["version"]


def test_version_info_and_ranges():
    info = parse.version_info((HOSTS / "910-old-hdk" / "driver-version.info").read_text())
    assert info["package_version"] == "23.0.5" and parse.version_range(info["compatible_version_fw"]) == \
        ("7.0.0", "7.1.99")
    assert parse.version_range("[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]") == ("23.0.rc3", "23.0.rc3.")


@pytest.mark.parametrize("found, minimum, ok", [
    ("25.2.0", "25.2", True), ("25.2.rc1", "25.2", True), ("26.0.rc1", "25.2", True), ("25.3.rc1", "25.2", True),
    ("25.1.rc2", "25.2", False), ("24.1.rc2.2", "25.2", False), ("25.0.rc1.1", "25.2", False),
    ("25.2.rc1", "25.2.0", False), ("23.0.5", "25.2", False), ("535.183.01", "525.60.13", True),
    ("525.60.13", "525.60.13", True), ("525.60.12", "525.60.13", False), ("470.182.03", "450.80.02", True),
    ("nonsense", "25.2", None),
])
def test_versions_at_least(found, minimum, ok):
    assert versions.at_least(found, minimum) is ok


@pytest.mark.parametrize("name", ["cuda.toml", "host.toml", "ascend.toml"])
def test_the_fallback_toml_reader_reads_every_data_file_as_tomllib(name):
    text = (REPO / "harness" / "preflight" / name).read_text()
    assert minitoml.loads(text) == tomllib.loads(text)


def test_the_fallback_toml_reader_refuses_what_it_does_not_know():
    for bad in ('a = {x = 1}', 'a = """x"""', 'a.b = 1', 'a = 1\na = 2', 'a = "open'):
        with pytest.raises(minitoml.TomlError):
            minitoml.loads(bad)


def test_every_vendor_fact_cites_a_source_with_a_url_and_a_quote():
    for d in (CUDA, HOSTDATA):
        for name, src in d["sources"].items():
            assert src["url"].startswith("https://") or src["url"] == "docs/platforms/cuda.md", name
            assert src["quote"] and src["confirmed"], name
    for tk in CUDA["toolkits"].values():
        assert tk["cite"]


def test_a_data_file_missing_a_key_is_one_clear_error(tmp_path):
    for name in ("cuda.toml", "host.toml", "ascend.toml"):
        shutil.copy(REPO / "harness" / "preflight" / name, tmp_path / name)
    ascend = (tmp_path / "ascend.toml").read_text()
    (tmp_path / "ascend.toml").write_text(re.sub(r'^min_firmware = .*\n', "", ascend, count=1, flags=re.M))
    with pytest.raises(data.DataError, match=r"\[chip\.910\]: needs `min_firmware`"):
        data.ascend(tmp_path)
    (tmp_path / "cuda.toml").write_text((tmp_path / "cuda.toml").read_text()
                                        .replace("[sources.unix-deprecation]", "[sources.renamed]"))
    with pytest.raises(data.DataError, match=r"branch_limit: cites `unix-deprecation`, which has no \[sources\.unix-"):
        data.cuda(tmp_path)


def test_ascend_toml_names_each_chip_s_npu_smi_names():
    """reproduce.sh picks ASCEND_CHIP by these names (harness.preflight.shell; tests/test_preflight_shell.py runs it
    on every recorded npu-smi)."""
    assert STACKS["910"]["npu_smi_names"] == ["910A", "910B", "910ProA", "910ProB", "910PremiumA"]
    assert all(re.fullmatch(r"910B[1-4].*", name) for name in STACKS["910b"]["npu_smi_names"])


# --- the training step -------------------------------------------------------------------------------------------


def test_step_summary_reads_ok_error_and_the_plugin_library():
    assert step.summary("noise\nok: torch 2.7.1 on cuda:0: one SGD step, loss 1.0 -> 0.9\n") == \
        "torch 2.7.1 on cuda:0: one SGD step, loss 1.0 -> 0.9"
    ms = ("[WARNING] ME(1:1,MainProcess): Load libmindspore_gpu.so.11.6 failed. libcuda.so.1: cannot open shared "
          "object file: No such file or directory\nerror: RuntimeError: Unsupported device target GPU.\n")
    assert step.summary(ms) == ("RuntimeError: Unsupported device target GPU. (libmindspore_gpu.so.11.6: libcuda.so.1: "
                                "cannot open shared object file)")
    assert step.summary("docker: Error response from daemon: x\n") == "docker: Error response from daemon: x"


@pytest.mark.parametrize("framework", step.FRAMEWORKS)
def test_the_cpu_step_trains_and_a_missing_device_is_one_line(framework):
    env = {**os.environ, "PYTHONPATH": str(REPO), "GLOG_v": "3"}
    ok = subprocess.run([sys.executable, "-m", "harness", "preflight-step", "--platform", "cpu", "--framework",
                         framework], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert ok.returncode == 0 and re.match(r"^ok: \S+ \S+ on \S+: one SGD step, loss [\d.]+ -> [\d.]+$",
                                           ok.stdout.strip()), ok.stdout + ok.stderr
    bad = subprocess.run([sys.executable, "-m", "harness", "preflight-step", "--platform", "cuda", "--framework",
                          framework], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert bad.returncode == 1 and bad.stdout.count("\n") == 1 and bad.stdout.startswith("error: "), bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr


def _dry_run_line(tmp_path, platform, engine, dev_files=()):
    from tests.helpers import fake_engine
    from tests.helpers import path_without_engines as _path_without_engines
    from tests.helpers import run_reproduce as run

    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in dev_files:
        (dev / name).touch()
    bin_dir = fake_engine(tmp_path, engine)
    proc = run(tmp_path, platform, "--dry-run", "--out", tmp_path / "o", dev=dev,
               path=f"{bin_dir}:{_path_without_engines(tmp_path)}", env={"ASCEND_CHIP": "910"})
    assert proc.returncode == 0, proc.stderr
    return shlex.split(next(ln for ln in proc.stdout.splitlines() if f"--platform {platform}" in ln))


@pytest.mark.parametrize("platform, engine", [("cuda", "docker"), ("cuda", "podman"), ("ascend", "docker"),
                                              ("ascend", "podman")])
def test_the_step_meets_the_devices_as_reproduce_sh_passes_them(tmp_path, platform, engine):
    devs = ("davinci0", "davinci3", "davinci_manager", "devmm_svm", "hisi_hdc") if platform == "ascend" else ()
    argv = _dry_run_line(tmp_path, platform, engine, devs)
    facts = {"ascend_devices": {f"/dev/{d}": {"exists": True} for d in devs},
             "user": {"uid": os.getuid(), "gid": os.getgid(), "hw_gid": None}}
    flags = step.container_flags(platform, engine, facts)
    n = len(flags)
    assert any(argv[i:i + n] == flags for i in range(len(argv))), f"{flags} not in {argv}"


def test_runs_under_the_oldest_python_it_claims(tmp_path):
    """Stdlib only and Python 3.8 syntax: the check runs before any venv, under the host's python3."""
    candidates = [*glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python")), shutil.which("python3.8")]
    is_38 = "import sys; assert sys.version_info[:2] == (3, 8)"
    py38 = next((c for c in candidates if c and subprocess.run([c, "-c", is_38], capture_output=True).returncode == 0),
                None)
    if not py38:
        pytest.skip("no Python 3.8 here")
    args = ["-m", "harness.preflight", "cuda", "--host-dir", str(HOSTS / "v100-r470")]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    old = subprocess.run([py38, *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    new = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert old.returncode == new.returncode == 2, old.stderr
    assert old.stdout == new.stdout and old.stderr == new.stderr


def test_rows_are_copies_not_shared_between_hosts():
    a, b = host("v100-r535"), copy.deepcopy(host("v100-r535"))
    b.outputs["nvidia-smi-query"] = Output(None)
    assert check(a, "NVIDIA GPU").verdict == PASS and check(b, "NVIDIA GPU").verdict == FAIL
