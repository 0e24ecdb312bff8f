"""What more than one test module uses: the checkout's paths, the harness's command line, small matrix files,
reproduce.sh under stand-in engines and devices, the image files' pins, the model probes, run folders and made-up
results. Fixtures and hooks are in tests/conftest.py; a test module imports from here, never from another test
module."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("HARNESS_SHARED_DATA", REPO.parent / "shared" / "data"))
MATRIX_TOML = REPO / "harness" / "config" / "matrix.toml"
SLOW_LIST = REPO / "tests" / "slow.txt"


# -- the slow set (tests/conftest.py marks it) ---------------------------------------------------------------------
def slow_entries(path: Path = SLOW_LIST) -> list[str]:
    """tests/slow.txt's entries: node ids (a parametrized test's name without its cases stands for every case) or a
    test file's path; `#` starts a comment."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


# The node ids a session collected, before `-m`, `-k` or `--deselect` took any out (tests/conftest.py stashes them where
# the session collected whole files: test_slow_list.py checks the list against them, else collects the entries anew).
COLLECTED = pytest.StashKey[list[str]]()


def is_slow(nodeid: str, entries: set[str]) -> bool:
    """Whether an entry names the test: its node id, its name without its case, or its file."""
    return nodeid in entries or nodeid.split("[", 1)[0] in entries or nodeid.split("::", 1)[0] in entries


# -- the harness's command line and matrix files ------------------------------------------------------------------
def harness(*args, timeout=900, extra_env=None, **kw):
    """Run `python -m harness ARGS` as a user would; returns the CompletedProcess."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env, **kw)


def write_matrix(path: Path, *, epochs: int = 5, timeout_s: int = 600, frameworks=("pytorch",),
                 modes=("eager",), extra: str = "") -> Path:
    """A small matrix file of the real format: GCN only, few epochs."""
    text = MATRIX_TOML.read_text()
    text = text.replace("profile.quick = { epochs = 30 }", f"profile.quick = {{ epochs = {epochs} }}")
    head, _, rest = text.partition("[profiles.quick]")
    # The other profiles stay (model tables name them); only the quick profile is replaced.
    others = rest[rest.index("[profiles."):] if "[profiles." in rest else ""
    path.write_text(head + others + f"""
[profiles.quick]
models = ["gcn"]
frameworks = {list(frameworks)!r}
modes = {list(modes)!r}
amp = ["off"]
devices = [1]
repeats = 1
timeout_s = {timeout_s}
""".replace("'", '"') + extra)
    return path


def with_quick_pynative(text: str) -> str:
    """Matrix text with the quick profile's PYNATIVE scaling and operator cells put back: the quick profile leaves them
    out to keep to its 15 minutes; the tests of the launchers' and the operators' PYNATIVE paths need them."""
    blocks = text.split("[[exclude]]")
    kept = [b for b in blocks[1:] if "fair baseline mode only" not in b and "leaves PYNATIVE's operators" not in b]
    assert len(kept) == len(blocks) - 3, "the quick profile's two PYNATIVE exclusions moved: update this helper"
    return "[[exclude]]".join([blocks[0], *kept])


def quick_pynative_matrix(path: Path) -> Path:
    path.write_text(with_quick_pynative(MATRIX_TOML.read_text()))
    return path


# -- reproduce.sh under stand-ins: a fake /dev (HARNESS_DEV_DIR), fake docker/podman on PATH ------------------------
REPRODUCE = REPO / "reproduce.sh"


def copy_reproduce(clone: Path) -> None:
    """reproduce.sh into a stand-in clone, with the files it reads (tools/unexpected.sh: its line for a failure no line
    of it foresaw; tools/reproduce_usage.txt: its usage; tools/reproduce/: its native and container runs)."""
    (clone / "tools").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPRODUCE, clone / "reproduce.sh")
    for name in ("unexpected.sh", "reproduce_usage.txt"):
        shutil.copy(REPO / "tools" / name, clone / "tools" / name)
    shutil.copytree(REPO / "tools" / "reproduce", clone / "tools" / "reproduce", dirs_exist_ok=True)


def checkout_without_venv(tmp_path: Path) -> Path:
    """reproduce.sh, the harness (what the script asks harness/preflight/shell.py) and the CPU lock in a folder with
    no .venv, as a fresh clone has them."""
    clone = tmp_path / "clone"
    (clone / "requirements").mkdir(parents=True)
    copy_reproduce(clone)
    shutil.copytree(REPO / "harness", clone / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "requirements" / "cpu.txt", clone / "requirements" / "cpu.txt")
    return clone


def path_without_engines(tmp_path: Path, python3: bool = True) -> str:
    """A PATH holding the tools the script needs but no docker or podman: with a python3 (what reproduce.sh asks of
    harness/preflight/shell.py on cuda and ascend, and --check runs harness/preflight with), or, python3=False, no
    Python at all."""
    bin_dir = tmp_path / ("sysbin" if python3 else "sysbin-nopython")
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "sed", "grep", "git", "date", "id", "sha256sum", "cut", "head", "basename", "dirname",
                 "mkdir", "cat", "uname", "printf", "awk", "df", "du"):
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    if python3 and not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    return str(bin_dir)


def fake_engine(tmp_path: Path, name: str = "docker", *, answers: bool = True, has_image: bool = True,
                build_ok: bool = True, report_error: str | None = None, rootless: bool = True) -> Path:
    """A docker/podman stand-in that logs its arguments (tab-separated, one call a line) to calls.log; with
    report_error, the harness's `report` inside it prints that line and exits 2, as the harness does. Asked
    `info --format {{.Host.Security.Rootless}}` (podman), it says `rootless`."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    on_report = (f"case \" $* \" in *' report /results '*) echo '{report_error}' >&2; exit 2 ;; esac;"
                 if report_error else "")
    script = f"""#!/usr/bin/env bash
{{ printf '%s\t' "$@"; printf '\n'; }} >> {log}
case "$1" in
  info) case "$*" in *Rootless*) echo {str(rootless).lower()} ;; esac; exit {0 if answers else 1} ;;
  image) exit {0 if has_image else 1} ;;
  build) echo "STEP 1/9: FROM base" >&2; exit {0 if build_ok else 1} ;;
  run) {on_report} exit 0 ;;
esac
exit 0
"""
    (bin_dir / name).write_text(script)
    (bin_dir / name).chmod(0o755)
    return bin_dir


def engine_calls(tmp_path: Path) -> list[list[str]]:
    """The calls fake_engine logged, one argument list a call."""
    log = tmp_path / "calls.log"
    return [line.rstrip("\t").split("\t") for line in log.read_text().splitlines()] if log.exists() else []


def run_reproduce(tmp_path: Path, *args, dev: Path | None = None, path: str | None = None, env: dict | None = None):
    """`bash reproduce.sh ARGS` in tmp_path, with a fake /dev (tmp_path/dev unless `dev`) and CONTAINER_ENGINE unset
    unless `env` sets it."""
    fake_dev = dev if dev is not None else tmp_path / "dev"
    fake_dev.mkdir(exist_ok=True)
    full_env = {**os.environ, "HARNESS_DEV_DIR": str(fake_dev), **(env or {})}
    full_env.pop("CONTAINER_ENGINE", None)
    if env and "CONTAINER_ENGINE" in env:
        full_env["CONTAINER_ENGINE"] = env["CONTAINER_ENGINE"]
    if path is not None:
        full_env["PATH"] = path
    return subprocess.run(["bash", str(REPRODUCE), *map(str, args)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=full_env)


def processes_with(needle: str) -> list[int]:
    """The pids whose command line holds NEEDLE (a process that ends while we look is skipped)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and needle.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def one_line_error(proc) -> str:
    """The one line a failing command printed on stderr."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert len(lines) == 1, f"expected one line on stderr, got: {proc.stderr!r}"
    return lines[0]


NPUSMI_FIXTURES = REPO / "tests" / "fixtures" / "npusmi"


def stand_in_npu_smi(tmp_path: Path, fixture: str) -> str:
    """A folder for PATH whose `npu-smi info` prints the fixture (a name in NPUSMI_FIXTURES or a path)."""
    bin_dir = tmp_path / "smi"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "npu-smi"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = info ] && cat {NPUSMI_FIXTURES / fixture}\n")
    script.chmod(0o755)
    return str(bin_dir)


def ascend_dry_run(tmp_path: Path, fixture: str | None, *extra: str, engine: str = "docker",
                   env: dict | None = None):
    """`reproduce.sh ascend --dry-run` on an 8-NPU host whose `npu-smi info` prints `fixture` (none: no npu-smi),
    with a fake engine that has no image yet."""
    sysbin = path_without_engines(tmp_path)
    for tool in ("awk", "sort", "wc", "getent"):  # used by the chip pick and the group lookup
        found = shutil.which(tool)
        if found and not (Path(sysbin) / tool).exists():
            (Path(sysbin) / tool).symlink_to(found)
    path = f"{fake_engine(tmp_path, engine, has_image=False)}:{sysbin}"
    if fixture:
        path = f"{stand_in_npu_smi(tmp_path, fixture)}:{path}"
    dev = tmp_path / "dev"  # an 8-NPU host: /dev/davinci0..7
    dev.mkdir(exist_ok=True)
    for n in range(8):
        (dev / f"davinci{n}").touch()
    return run_reproduce(tmp_path, "ascend", "--dry-run", "--out", tmp_path / "o", "--data-dir", tmp_path / "d",
                         *extra, dev=dev, path=path, env=env)


# -- the images' Dockerfiles and locks ----------------------------------------------------------------------------
def dockerfile_arg(dockerfile: str, name: str) -> str:
    """The default of `ARG NAME=...` in a Dockerfile of the checkout."""
    m = re.search(rf"^ARG {name}=(\S+)$", (REPO / dockerfile).read_text(), re.M)
    assert m, f"{dockerfile} has no ARG {name}=..."
    return m.group(1)


def dockerfile_env(dockerfile: str) -> dict[str, str]:
    """The ENV keys and values a Dockerfile sets (all ENV instructions, continuation lines joined)."""
    text = (REPO / dockerfile).read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', line[4:]):
                env[key] = value.strip('"')
    return env


def lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes) of a requirements/*.txt lock."""
    text = (REPO / "requirements" / name).read_text()
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block)
        if m:
            pins[m.group(1).lower()] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return pins


# -- a model's probe step (tests/probe_model.py) --------------------------------------------------------------------
_PROBED: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}


def probe_model(tmp_path: Path, model: str, framework: str, mode: str) -> dict[str, np.ndarray]:
    """The arrays tests/probe_model.py saves for one model, framework and mode, run in a process of its own. The
    probe is deterministic (the shared numpy weights and batch): each (model, framework, mode) is run once per test
    process and its arrays kept, so the PyTorch side that several MindSpore modes are compared with runs once."""
    from harness.frameworks import backend

    key = (model, framework, mode)
    if key not in _PROBED:
        out = tmp_path / f"{model}-{framework}-{mode}.npz"
        env = {**os.environ, **backend(framework).process_env("cpu"), "PYTHONPATH": str(REPO)}
        p = subprocess.run([sys.executable, str(REPO / "tests" / "probe_model.py"), model, framework, mode, out],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        with np.load(out) as arrays:
            _PROBED[key] = {name: arrays[name] for name in arrays.files}
    return _PROBED[key]


def rel_diff(a, b):
    """Largest absolute difference, relative to the largest magnitude of the reference."""
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


# -- run folders and made-up results ------------------------------------------------------------------------------
def write_run(folder: Path, platform: str, env: dict, results: list[dict], profile: str = "quick") -> Path:
    """A run folder as the runner leaves it: run.json, env.json and each result as cells/CELL/rREPEAT.json."""
    (folder / "cells").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"platform": platform, "profile": profile, "invocations": []}))
    (folder / "env.json").write_text(json.dumps(env))
    for r in results:
        d = folder / "cells" / r["cell"]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"r{r.get('repeat', 0)}.json").write_text(json.dumps(r))
    return folder


CLAIM_MODELS = ("resnet50", "gcn", "gru")


def model_result(name, fw, mode, amp="off", *, other, first=None, ttt=None, devices=1, status="ok", repeat=0,
                 platform="cpu", **kw):
    """A made-up result of a model (or, with devices > 1, scaling) cell."""
    kind = "model" if devices == 1 else "scaling"
    r = {"cell": f"{kind}/{name}/{fw}/{mode}/amp-{amp}/{devices}dev", "kind": kind, "model": name, "framework": fw,
         "mode": mode, "amp": amp, "devices": devices, "status": status, "repeat": repeat, "platform": platform,
         "synthetic": False, "dataset": "d", "throughput_unit": "items/s", "metric": "accuracy", "target": 0.8,
         "best_metric": 0.9 if ttt else 0.5, "first_epoch_throughput": other if first is None else first,
         "mean_throughput_other_epochs": other, "time_to_target_s": ttt, "reason": None}
    if status != "ok":
        r.update(reason="exit code 1: boom", first_epoch_throughput=None, mean_throughput_other_epochs=None)
    return {**r, **kw}


def scaling_result(name, fw, mode, n, per_device, **kw):
    """A made-up result of an n-device scaling cell."""
    return model_result(name, fw, mode, devices=n, other=per_device * n, per_device_throughput=per_device,
                        global_throughput=per_device * n, **kw)


def op_result(name, fw, mode, params, throughput, direction="fwd", dtype="fp32", batch=16, **kw):
    """A made-up result of an operator cell."""
    return {"cell": f"operator/{name}/{fw}/{mode}/{dtype}/{direction}/batch{batch}-p{params}", "kind": "operator",
            "op": name, "framework": fw, "mode": mode, "amp": "off", "devices": 1, "dtype": dtype,
            "direction": direction, "shape": {"batch": batch, "p": params}, "params": params,
            "throughput": throughput, "status": "ok", "repeat": 0, "platform": "cpu", "reason": None, **kw}


# MindSpore/PyTorch operator throughput ratios as the paper describes them: BatchNorm ahead even when small,
# Conv2d ahead only when large, every ratio growing with the parameter count.
PAPER_OPS = {"batchnorm2d": {32: 2.0, 512: 3.0}, "conv2d": {9280: 0.5, 36928: 0.8, 147712: 2.0},
             "linear": {33280: 0.5, 262656: 1.5}}


def paper_world(ops=PAPER_OPS):
    """Results that agree with every claim of the paper, keyed by cell id and repeat."""
    rs = []
    for m in CLAIM_MODELS:
        pt, ms = (100.0, 200.0) if m == "resnet50" else (100.0, 50.0)       # MindSpore faster on ResNet50 only
        ttt_pt, ttt_ms = (10.0, 2.0) if m == "resnet50" else (2.0, 10.0)
        rs += [model_result(m, "pytorch", "eager", other=pt, first=0.95 * pt, ttt=ttt_pt),
               model_result(m, "pytorch", "eager", "O2", other=1.5 * pt, first=1.4 * pt),
               model_result(m, "mindspore", "graph", other=ms, first=0.3 * ms, ttt=ttt_ms),
               model_result(m, "mindspore", "graph", "O2", other=1.5 * ms, first=0.3 * ms),
               model_result(m, "mindspore", "graph", "O3", other=1.6 * ms, first=0.3 * ms),
               model_result(m, "mindspore", "pynative", other=0.5 * min(pt, ms))]
    rs += [scaling_result("resnet50", "mindspore", "graph", 2, 0.9 * 200.0),
           scaling_result("resnet50", "pytorch", "eager", 2, 0.6 * 100.0)]
    for name, ratios in ops.items():
        for direction in ("fwd", "fwd+bwd"):
            for params, ratio in ratios.items():
                rs += [op_result(name, "pytorch", "eager", params, 1000.0, direction),
                       op_result(name, "mindspore", "graph", params, 1000.0 * ratio, direction),
                       op_result(name, "mindspore", "pynative", params, 10.0, direction)]
    return {(r["cell"], r["repeat"]): r for r in rs}


def claim(world_or_results, cid_, **kw):
    """The claim `cid_` as harness.claims evaluates the results (a paper_world dict or a list)."""
    from harness import claims

    results = list(world_or_results.values()) if isinstance(world_or_results, dict) else world_or_results
    found = {c.id: c for c in claims.evaluate(results, **kw)}
    assert set(found) == set(claims.TITLES)
    return found[cid_]
