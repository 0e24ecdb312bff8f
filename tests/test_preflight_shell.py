"""harness/preflight/shell.py, what reproduce.sh asks Python to decide, run as the script runs it (`python3 -m
harness.preflight.shell QUESTION ...`) on planted inputs: a fake /dev (HARNESS_DEV_DIR), a stand-in `npu-smi` (NPU_SMI),
a Python that lacks a framework (a sitecustomize hiding it), the engine and the HwHiAiUser group. Its answers are the
preflight's (checks_cuda, checks_ascend, parse.ascend_chip over ascend.toml, step.device_flags) and the harness's
(`harness list`)."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.preflight import data, parse, shell, step
from harness.preflight.checks_ascend import NO_NPU
from harness.preflight.checks_cuda import NO_GPU
from tests.conftest import REPO

NPUSMI = REPO / "tests" / "fixtures" / "npusmi"
STACKS = data.ascend()


def ask(*args, env: dict | None = None, python: str = sys.executable, flags: tuple = ()):
    """`python3 -m harness.preflight.shell ARGS` as reproduce.sh runs it, with ASCEND_CHIP and NPU_SMI unset unless
    `env` sets them."""
    full = {k: v for k, v in os.environ.items() if k not in ("ASCEND_CHIP", "NPU_SMI", "HARNESS_DEV_DIR")}
    full = {**full, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([python, *flags, "-m", "harness.preflight.shell", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=full)


def answer(proc) -> list[tuple[str, str]]:
    return [tuple(line.split(" ", 1)) for line in proc.stdout.splitlines()]


def fake_dev(tmp_path: Path, *names: str) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    for name in names:
        (dev / name).touch()
    return dev


def npu_smi(tmp_path: Path, text: str) -> Path:
    """A stand-in `npu-smi` whose `info` prints `text`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shown = tmp_path / "npu-smi-info.txt"
    shown.write_text(text)
    tool = tmp_path / "npu-smi"
    tool.write_text(f'#!/bin/sh\n[ "$1" = info ] && cat {shown}\n')
    tool.chmod(0o755)
    return tool


def with_name(name: str) -> str:
    """The 8-NPU 910ProB fixture with `name` in every Name cell."""
    return (NPUSMI / "910prob_info.txt").read_text().replace("910ProB            ", f"{name:<19}")


# --- devices: the GPUs -----------------------------------------------------------------------------------------


def test_gpus_are_the_nvidia_files_of_the_fake_dev_and_none_is_refused_unless_only_printed_or_built(tmp_path):
    some = ask("devices", "cuda", env={"HARNESS_DEV_DIR": str(fake_dev(tmp_path / "a", "nvidia0", "nvidiactl"))})
    assert some.returncode == 0 and some.stdout == "" and some.stderr == "", some.stderr
    dev = fake_dev(tmp_path / "b", "nvidiactl")   # the control file is no GPU
    none = ask("devices", "cuda", env={"HARNESS_DEV_DIR": str(dev)})
    assert none.returncode == 2 and answer(none) == [("say", f"reproduce.sh: {NO_GPU.format(dev=dev)}")]
    dry = ask("devices", "cuda", "--dry-run", env={"HARNESS_DEV_DIR": str(dev)})
    assert dry.returncode == 0
    assert answer(dry) == [("say", "# no NVIDIA GPU on this host: the commands below are what a GPU host runs")]
    build = ask("devices", "cuda", "--build", env={"HARNESS_DEV_DIR": str(dev)})
    assert build.returncode == 0 and build.stdout == ""


# --- devices: the NPUs and the chip ----------------------------------------------------------------------------


def test_npus_are_the_davinci_files_present_in_the_order_of_the_shells_glob(tmp_path):
    dev = fake_dev(tmp_path, "davinci0", "davinci3", "davinci10", "davinci_manager", "devmm_svm")
    proc = ask("devices", "ascend", env={"HARNESS_DEV_DIR": str(dev), "ASCEND_CHIP": "910b"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert answer(proc) == [("npu", "/dev/davinci0"), ("npu", "/dev/davinci10"), ("npu", "/dev/davinci3"),
                            ("chip", "910b"), ("chip_why", "ASCEND_CHIP"), ("chip_image", "ms-pt-harness:ascend-910b")]


def test_no_npu_is_refused_unless_only_printed_or_built_which_show_an_8_npu_server(tmp_path):
    dev = fake_dev(tmp_path, "davinci_manager")
    env = {"HARNESS_DEV_DIR": str(dev), "ASCEND_CHIP": "910"}
    none = ask("devices", "ascend", env=env)
    assert none.returncode == 2 and answer(none) == [("say", f"reproduce.sh: {NO_NPU.format(dev=dev)}")]
    server = [("npu", f"/dev/davinci{n}") for n in range(8)] + [("chip", "910"), ("chip_why", "ASCEND_CHIP"),
                                                               ("chip_image", "ms-pt-harness:ascend-910")]
    dry = ask("devices", "ascend", "--dry-run", env=env)
    assert dry.returncode == 0 and answer(dry) == [
        ("say", f"# no {dev}/davinci[0-9]* on this host: the commands below show an 8-NPU Ascend 910 server"), *server]
    build = ask("devices", "ascend", "--build", env=env)
    assert build.returncode == 0 and answer(build) == server


@pytest.mark.parametrize("fixture", sorted(p.name for p in NPUSMI.glob("*_info.txt")))
def test_the_chip_is_the_one_the_preflight_picks_for_every_recorded_npu_smi(tmp_path, fixture):
    """The script and `--check` read `npu-smi info` alike: parse.npu_smi_info's names, parse.ascend_chip's chip."""
    text = (NPUSMI / fixture).read_text()
    names = parse.npu_smi_info(text)["names"]
    picked = parse.ascend_chip(names, STACKS)[0]
    tool = npu_smi(tmp_path, text)
    proc = ask("devices", "ascend", env={"HARNESS_DEV_DIR": str(fake_dev(tmp_path, "davinci0")), "NPU_SMI": str(tool)})
    if picked:
        assert proc.returncode == 0, proc.stdout
        assert answer(proc)[1:] == [("chip", picked), ("chip_why", f"npu-smi info: {names[0]} x{len(names)}"),
                                    ("chip_image", f"ms-pt-harness:ascend-{picked}")]
    else:
        assert proc.returncode == 2 and answer(proc) == [("npu", "/dev/davinci0"), (
            "say", f"reproduce.sh: chip {names[0]} ({tool} info) has no image here: Dockerfile.ascend builds for "
                   "Ascend 910 (ASCEND_CHIP=910) and 910B / Atlas A2 (910b); see ARTIFACT.md")]


@pytest.mark.parametrize("name, chip", [*[(n, c) for c, s in sorted(STACKS.items()) for n in s["npu_smi_names"]],
                                        ("910B5", None), ("910B1X", None), ("910ProC", None), ("Ascend910", None)])
def test_each_name_of_ascend_toml_picks_its_chip_and_no_other_name_does(tmp_path, name, chip):
    """ascend.toml is the one map from `npu-smi info` names to chips: a name it does not list has no image, even one
    that looks like a listed one."""
    tool = npu_smi(tmp_path, with_name(name))
    proc = ask("devices", "ascend", env={"HARNESS_DEV_DIR": str(fake_dev(tmp_path, "davinci0")), "NPU_SMI": str(tool)})
    said = dict(answer(proc))
    if chip:
        assert proc.returncode == 0 and said["chip"] == chip and said["chip_why"] == f"npu-smi info: {name} x8"
    else:
        assert proc.returncode == 2 and said["say"].startswith(f"reproduce.sh: chip {name} ({tool} info) has no image")


def test_several_chip_types_or_none_in_npu_smi_are_refused(tmp_path):
    env = {"HARNESS_DEV_DIR": str(fake_dev(tmp_path, "davinci0"))}
    mixed = (NPUSMI / "910b3_info.txt").read_text().replace("| 7     910B3      ", "| 7     910B4      ")
    proc = ask("devices", "ascend", env={**env, "NPU_SMI": str(npu_smi(tmp_path / "mixed", mixed))})
    assert proc.returncode == 2 and answer(proc)[-1][1].endswith(
        "info lists several chip types (910B3 x7 910B4 x1); set ASCEND_CHIP=910 or 910b")
    tool = npu_smi(tmp_path, "")
    proc = ask("devices", "ascend", env={**env, "NPU_SMI": str(tool)})
    assert proc.returncode == 2 and answer(proc)[-1] == (
        "say", f"reproduce.sh: {tool} info lists no NPU name; check the driver (npu-smi info), or set "
               "ASCEND_CHIP=910 or 910b")


def test_without_npu_smi_the_910_is_assumed_and_its_refusal_kept_for_when_an_image_is_needed(tmp_path):
    proc = ask("devices", "ascend", env={"HARNESS_DEV_DIR": str(fake_dev(tmp_path, "davinci0")),
                                         "NPU_SMI": str(tmp_path / "no-npu-smi")})
    assert proc.returncode == 0, proc.stdout
    assert dict(answer(proc)) == {
        "npu": "/dev/davinci0", "chip": "910", "chip_why": "no npu-smi on this host: the Ascend 910 default",
        "chip_unknown": "npu-smi not found, so the chip (and the image's base) is unknown; install the Ascend driver's "
                        "tools, or set ASCEND_CHIP=910 or 910b", "chip_image": "ms-pt-harness:ascend-910"}


@pytest.mark.parametrize("given", ["950", "910B3", "ascend910"])
def test_an_ascend_chip_outside_ascend_toml_is_refused(tmp_path, given):
    proc = ask("devices", "ascend", env={"HARNESS_DEV_DIR": str(fake_dev(tmp_path, "davinci0")), "ASCEND_CHIP": given})
    assert proc.returncode == 2 and answer(proc)[-1] == (
        "say", f"reproduce.sh: ASCEND_CHIP={given} is not a chip this image is built for; choose 910 (Ascend 910) or "
               "910b (Atlas A2)")


# --- frameworks: asked of a --native Python ----------------------------------------------------------------------


def _python_without(tmp_path: Path, module: str) -> Path:
    """A Python in which `module` is not installed (as a missing install looks to Python: find_spec finds None)."""
    shim = tmp_path / f"hide-{module}"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    wrapper = tmp_path / f"python-without-{module}"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH='{shim}:{REPO}' exec '{sys.executable}' \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def test_a_python_with_both_frameworks_leaves_nothing_out():
    proc = ask("frameworks", "cuda", "accelerator", "python3", "--only", "model/gcn/*")
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


def test_a_python_without_mindspore_leaves_its_cells_out_as_harness_list_records_them(tmp_path):
    py = _python_without(tmp_path, "mindspore")
    proc = ask("frameworks", "cuda", "accelerator", py, "--only", "model/gcn/*", python=str(py))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert answer(proc) == [("say", f"reproduce.sh: {py} has no mindspore for cuda: its 6 of 10 cells are left out "
                                    "(recorded as skipped): model/gcn/mindspore/graph/amp-off/1dev "
                                    "model/gcn/mindspore/graph/amp-O2/1dev model/gcn/mindspore/graph/amp-O3/1dev ...")]


def test_a_python_with_none_of_the_selected_cells_frameworks_is_refused_unless_only_printed(tmp_path):
    py = _python_without(tmp_path, "mindspore")
    proc = ask("frameworks", "cuda", "accelerator", py, "--only", "model/gcn/mindspore/*", python=str(py))
    assert proc.returncode == 2 and answer(proc) == [(
        "say", f"reproduce.sh: {py} has none of the frameworks the selected cells need (mindspore); install the cuda "
               "build of torch or mindspore (see ARTIFACT.md), set PYTHON, or drop --native to use the image")]
    dry = ask("frameworks", "cuda", "accelerator", py, "--only", "model/gcn/mindspore/*", "--dry-run", python=str(py))
    assert dry.returncode == 0 and answer(dry) == [("say", f"# {py} has none of the frameworks these cells need "
                                                           "(mindspore)")]


def test_a_glob_that_selects_no_cell_is_refused_unless_only_printed(tmp_path):
    py = _python_without(tmp_path, "mindspore")
    proc = ask("frameworks", "cuda", "accelerator", py, "--only", "nothing*", python=str(py))
    assert proc.returncode == 2 and answer(proc) == [(
        "say", f"reproduce.sh: python -m harness list found no cells for --only 'nothing*'; see: {py} -m harness list "
               "--profile accelerator")]
    dry = ask("frameworks", "cuda", "accelerator", py, "--only", "nothing*", "--dry-run", python=str(py))
    assert dry.returncode == 0 and dry.stdout == ""


# --- container: the arguments of `ENGINE run` that reach the devices -------------------------------------------------


def test_cuda_passes_every_gpu_as_each_engine_asks_and_keeps_the_jit_cache_on_the_host(tmp_path):
    """docker's --gpus, podman's CDI request (the preflight's step container takes the same); the driver's JIT cache
    in a kept host folder, $XDG_CACHE_HOME's or ~/.cache's, which the script makes before the run."""
    tail = ["--network", "host", "-v", f"{tmp_path}/xdg/ms-pt-harness/cuda-jit:/cache/cuda-jit"]
    for engine, rootless, gpus in (("docker", "0", ["--gpus", "all"]), ("/usr/bin/podman", "1", [
            "--device", "nvidia.com/gpu=all"]), ("podman", "0", ["--device", "nvidia.com/gpu=all"])):
        proc = ask("container", "cuda", engine, rootless, env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
        assert proc.returncode == 0, proc.stderr
        said = answer(proc)
        assert said[0] == ("made", f"{tmp_path}/xdg/ms-pt-harness/cuda-jit")
        assert [v for k, v in said if k == "arg"] == gpus + tail == step.device_flags(
            "cuda", "podman" in engine, rootless == "1", [], None) + tail
    home = ask("container", "cuda", "docker", "0", env={"XDG_CACHE_HOME": "", "HOME": str(tmp_path)})
    assert answer(home)[0] == ("made", f"{tmp_path}/.cache/ms-pt-harness/cuda-jit")


ASCEND_FIXED = ["--device", "/dev/davinci_manager", "--device", "/dev/devmm_svm", "--device", "/dev/hisi_hdc",
                "-v", "/usr/local/dcmi:/usr/local/dcmi:ro", "-v", "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro",
                "-v", "/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/:ro",
                "-v", "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info:ro",
                "-v", "/etc/ascend_install.info:/etc/ascend_install.info:ro", "--network", "host"]


@pytest.mark.parametrize("engine, rootless, group, added", [
    ("podman", "1", 1001, ["--group-add", "keep-groups"]),   # rootless podman: the caller's own groups
    ("podman", "0", 1001, ["--group-add", "1001"]),          # rootful podman and docker: HwHiAiUser's number
    ("docker", "0", 1001, ["--group-add", "1001"]),
    ("docker", "0", None, []),                               # no such group here: none added
])
def test_ascend_passes_the_npus_given_the_drivers_group_and_files(monkeypatch, capsys, engine, rootless, group,
                                                                  added):
    import grp

    def getgrnam(name):
        if name != "HwHiAiUser" or group is None:
            raise KeyError(name)
        return grp.struct_group(("HwHiAiUser", "x", group, []))

    monkeypatch.setattr(grp, "getgrnam", getgrnam)
    assert shell.main(["container", "ascend", engine, rootless, "/dev/davinci0", "/dev/davinci3"]) == 0
    said = [tuple(line.split(" ", 1)) for line in capsys.readouterr().out.splitlines()]
    assert all(k == "arg" for k, _ in said)
    assert [v for _, v in said] == ["--device", "/dev/davinci0", "--device", "/dev/davinci3", *added, *ASCEND_FIXED]


# --- apex: an image there, built with another apex choice ---------------------------------------------------------


def stand_in_engine(tmp_path: Path, *, label: str = "", size: str = "", store: str = "") -> Path:
    """A docker stand-in: `image inspect --format` prints the image's io.ms-pt-harness.apex label or its size in bytes,
    `info --format` the folder where it keeps its images; each call logged to engine.log."""
    log = tmp_path / "engine.log"
    tool = tmp_path / "docker"
    tool.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  *io.ms-pt-harness.apex*) printf '%s\\n' '{label}' ;;
  *Size*) printf '%s\\n' '{size}' ;;
  info*) printf '%s\\n' '{store}' ;;
esac
""")
    tool.chmod(0o755)
    return tool


@pytest.mark.parametrize("label, said", [
    ("build:6f1c2e", None),   # built with the choice (the label begins with it): kept
    ("skip", "was built with ASCEND_APEX=skip"),
    ("skip:", "was built with ASCEND_APEX=skip"),
    ("", "was built without an io.ms-pt-harness.apex label"),
])
def test_an_image_built_with_another_apex_choice_is_built_again(tmp_path, label, said):
    engine = stand_in_engine(tmp_path, label=label)
    proc = ask("apex", engine, "ms-pt-harness:ascend-910", "build")
    assert proc.returncode == 0, proc.stderr
    assert answer(proc) == ([] if said is None else [
        ("say", f"reproduce.sh: ms-pt-harness:ascend-910 {said}; building it again with ASCEND_APEX=build"),
        ("need_build", "1")])
    assert (tmp_path / "engine.log").read_text() == (
        'image inspect --format {{ index .Config.Labels "io.ms-pt-harness.apex" }} ms-pt-harness:ascend-910\n')


# --- build, built: the lines around an image build --------------------------------------------------------------


def test_the_build_plan_is_said_at_the_engines_storage_and_what_it_took_after(tmp_path):
    store = tmp_path / "storage"
    store.mkdir()
    engine = stand_in_engine(tmp_path, size="2000000000", store=str(store))   # 2 GB (1953125 KB: 2.0 GB)
    before = ask("build", "cuda", engine, tmp_path / "checkout")
    assert before.returncode == 0, before.stderr
    said = dict(answer(before))
    assert said["say"].startswith("reproduce.sh: --build makes the image of Dockerfile.cuda: downloads ")
    assert f"GB free at {store} (" in said["say"]
    assert said["say"].endswith(f"; takes {data.host()['build']['cuda']['time']}")
    at, free, where = said["began"].split(" ", 2)
    assert where == str(store) and free.isdigit() and abs(int(at) - time.time()) < 60
    after = ask("built", "ms-pt-harness:cuda", engine, f"{int(time.time()) - 125} 20000000 {store}")
    assert after.returncode == 0, after.stderr
    [(key, line)] = answer(after)
    assert key == "say" and re.fullmatch(
        rf"reproduce\.sh: built ms-pt-harness:cuda in 2 min [5-9] s; it holds 2\.0 GB; free disk at "
        rf"{re.escape(str(store))}: 20\.5 GB before, \d+\.\d GB after", line), line
    assert (tmp_path / "engine.log").read_text().splitlines() == [
        "info --format {{.DockerRootDir}}", "image inspect --format {{.Size}} ms-pt-harness:cuda"]


def test_an_engine_that_does_not_say_leaves_the_checkout_and_unknown_figures(tmp_path):
    """podman's storage is asked with its own format; none (or a folder not there): the checkout's disk is said."""
    podman = stand_in_engine(tmp_path, store=str(tmp_path / "not-there")).rename(tmp_path / "podman")
    said = dict(answer(ask("build", "cpu", podman, tmp_path)))
    assert said["say"].startswith("reproduce.sh: --build makes the image of Dockerfile.cpu: downloads ")
    assert said["began"].endswith(f" {tmp_path}")
    after = ask("built", "ms-pt-harness:cpu", podman, f"{int(time.time())} - {tmp_path}")
    assert answer(after)[0][1].startswith("reproduce.sh: built ms-pt-harness:cpu in 0 min ")
    assert " s; it holds unknown; free disk at " in answer(after)[0][1]
    assert answer(after)[0][1].split(": ")[-1].startswith("unknown before, ")
    assert (tmp_path / "engine.log").read_text().splitlines()[0] == "info --format {{.Store.GraphRoot}}"


# --- where it runs --------------------------------------------------------------------------------------------------


def test_it_runs_without_site_packages_and_under_the_oldest_python_it_claims(tmp_path):
    """Standard library only (python -S: no site-packages), and Python 3.8's syntax: the script asks it before any
    .venv exists, under the host's python3."""
    args = ("devices", "ascend", "--dry-run")
    env = {"HARNESS_DEV_DIR": str(fake_dev(tmp_path)), "NPU_SMI": str(npu_smi(tmp_path, with_name("910B2C"))),
           "PYTHONDONTWRITEBYTECODE": "1"}
    new = ask(*args, env=env, flags=("-S",))
    assert new.returncode == 0 and dict(answer(new))["chip"] == "910b", new.stdout + new.stderr
    py38 = Path(os.path.expanduser("~/.pyenv/versions")).glob("3.8*/bin/python")
    old = next((str(p) for p in py38 if p.exists()), None)
    if not old:
        pytest.skip("no Python 3.8 here")
    assert ask(*args, env=env, python=old).stdout == new.stdout
