"""Verdicts every platform shares: Python and .venv (cpu natively), the container engine and its BuildKit, free
disk against the measured build peak, the image (present, or buildable), and the training step of each
framework. Facts from the `Host`, numbers from host.toml; no I/O here.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from harness.preflight import FAIL, NEXT, NOTE, PASS, SKIP, Row, parse, step
from harness.preflight.host import Host

STEP_LABEL = {"pytorch": "PyTorch", "mindspore": "MindSpore"}
UNFINISHED = "an interrupted or unfinished build (no stamp)"   # a .venv without reproduce.sh's stamp
# a training step not run for one of these waits for --build (the image's: "image ...")
NOT_BUILT = ("no .venv yet", UNFINISHED)
DEVICE = {"cpu": "CPU", "cuda": "GPU", "ascend": "NPU"}


INSTEAD = ("add --container to run in the CPU image (docker or podman; no host Python needed), or install Python "
           "{want} and set PYTHON=/path/to/python{want}")


def is_locks_python(got: str, want: str) -> bool:
    """Whether a Python that prints version GOT ("3.11.2"; "3.11" in older host records) is the lock's WANT ("3.11"):
    major.minor alike, so 3.1.4 and 3.110.0 are not 3.11. The one answer --check's row and the .venv build share."""
    return ".".join(got.split(".")[:2]) == want


def wrong_python(base: str | None, got: str, want: str) -> str:
    """Why BASE (None: no python3 found) cannot make .venv, and what to do instead: the fix of the failing Python row
    here, and the refusal of `./reproduce.sh cpu` (harness/preflight/venvbuild.py). `got`: its version ("" where it
    does not run)."""
    why = (f"{base} is Python {got}, and the lock pins wheels for Python {want}" if got
           else f"{base} does not run" if base else f"no python3 found, and the lock pins wheels for Python {want}")
    return f"{why}; {INSTEAD.format(want=want)}"


def python_rows(host: Host, hostdata: dict[str, Any]) -> list[Row]:
    """cpu natively: the .venv made from requirements/cpu.txt, and the Python 3.11 that makes it (its version, and
    that it can make a venv: Debian and Ubuntu ship venv's ensurepip apart, in python3.11-venv)."""
    f = host.facts
    venv = f.get("venv", {})
    want = hostdata["python"]["version"]
    made = bool(venv.get("python") and venv.get("stamp_ok"))
    out = []
    needed = "a .venv from the lock (reproduce.sh makes it)"
    if made:
        out.append(Row(".venv", ".venv made from requirements/cpu.txt", needed, PASS))
    elif venv.get("python") and not venv.get("stamp"):
        # reproduce.sh writes the stamp last: without it the .venv may lack any package (an interrupted pip, a
        # venv made without ensurepip), so the training steps are not run in it either
        out.append(Row(".venv", f".venv present: {UNFINISHED}", needed, NEXT,
                       note=f"{UNFINISHED}: ./reproduce.sh cpu --build makes it again from requirements/cpu.txt "
                            "(hash-checked), then --check again runs the training steps"))
    elif venv.get("python"):
        out.append(Row(".venv", ".venv present, not made from this requirements/cpu.txt (no matching stamp)", needed,
                       NOTE,
                       note="./reproduce.sh cpu makes .venv again from requirements/cpu.txt before it runs "
                            "(hash-checked, about 4 GB from the PyTorch CPU index and PyPI); this check ran the one "
                            "there now"))
    else:
        out.append(Row(".venv", "not built yet", needed, NEXT,
                       note="next: ./reproduce.sh cpu --build makes it from requirements/cpu.txt (hash-checked, "
                            "from the network; it prints the size and time first), then --check again runs the "
                            "training steps"))
    base = f.get("base_python")
    got = host.out("python-version").text.strip() if host.out("python-version").ok else ""
    found = f"{base}: Python {got}" if base and got else f"{base}: does not run" if base else "no python3.11/python3"
    check = f"Python {want}"
    needed = f"Python {want} that can make a venv ({hostdata['python'].get('why', '')}) to make .venv"
    if made:  # the .venv is made: no Python needed to make it
        ok = is_locks_python(got, want) and host.out("python-venv").ok
        return out + [Row(check, found + ("" if ok else " (not needed: .venv is made)"), needed, PASS)]
    if not is_locks_python(got, want):
        return out + [Row(check, found, needed, FAIL, fix=wrong_python(base, got, want))]
    if host.out("python-venv").ok:
        return out + [Row(check, found + ", venv and ensurepip", needed, PASS)]
    found += ", no venv/ensurepip module (python3.11-venv not installed)"
    if f.get("uid") == 0 and f.get("apt_get"):
        return out + [Row(check, found, needed, NEXT,
                          note=f"./reproduce.sh cpu --build installs python3.11-venv (apt-get) before it makes .venv "
                               f"with {base}")]
    return out + [Row(check, found, needed, FAIL,
                      fix=f"{base} cannot make a venv (no ensurepip/venv module): as root, apt-get install "
                          f"python{want}-venv (Debian/Ubuntu), or add --container to run in the CPU image")]


def openmp_rows(host: Host) -> list[Row]:
    """cpu natively: libgomp.so.1, the OpenMP runtime MindSpore's CPU kernels link (PyTorch's wheel carries its own;
    the images install Debian's libgomp1). Without it every MindSpore cell fails on import."""
    f = host.facts
    if "libgomp" not in f:   # a recorded host from before this fact was collected
        return []
    check, needed = "OpenMP runtime", "libgomp.so.1 (libgomp1), which MindSpore's CPU kernels link"
    if f["libgomp"]:
        return [Row(check, f["libgomp"], needed, PASS)]
    made = bool(f.get("venv", {}).get("python") and f.get("venv", {}).get("stamp_ok"))
    if f.get("uid") == 0 and f.get("apt_get") and not made:
        return [Row(check, "not found (ldconfig -p)", needed, NEXT,
                    note="./reproduce.sh cpu --build installs libgomp1 (apt-get) before it makes .venv")]
    return [Row(check, "not found (ldconfig -p)", needed, FAIL,
                fix="this host has no libgomp.so.1, so every MindSpore cell would fail: as root, apt-get install "
                    "libgomp1 (Debian/Ubuntu), or add --container to run in the CPU image")]


def engine_rows(host: Host, hostdata: dict[str, Any], platform: str) -> list[Row]:
    f = host.facts
    engine, info = f.get("engine"), host.out("engine-info")
    name = os.path.basename(engine) if engine else None
    docker = hostdata["docker"]
    needed = "docker (BuildKit) or podman, answering `info`"
    if not engine:
        tail = "; or drop --container" if platform == "cpu" else ""
        return [Row("container engine", "neither docker nor podman answers", needed, FAIL,
                    fix=f"no container engine: neither docker nor podman is installed and answering (docker info / "
                        f"podman info); {docker['install']}{tail}"),
                Row("image build (BuildKit)", "no container engine", f"docker >= {docker['buildkit_default_from']} "
                    "or podman", SKIP)]
    if not info.ok:
        return [Row("container engine", f"{name}: {info.first_line() or 'not installed'}", needed, FAIL,
                    fix=f"{name} does not answer `{name} info` ({info.first_line() or 'not found'}): "
                        "start its service, or give your user access to it (docker: the docker group)"),
                Row("image build (BuildKit)", f"{name} does not answer", f"docker >= {docker['buildkit_default_from']} "
                    "or podman", SKIP)]
    if name == "podman":
        version = parse.podman_version(host.out("podman-version").text) or "?"
        rows = [Row("container engine", f"podman {version}", needed, PASS)]
        build = Row("image build (BuildKit)", f"podman {version} (builds with buildah)", "RUN --mount in Dockerfiles",
                    NOTE, note="podman builds with buildah; CI builds these Dockerfiles with buildah itself and "
                               "runs the CPU image through reproduce.sh under podman and docker")
    else:
        d = parse.docker_info(info.text)
        version = d["server_version"] or "?"
        rows = [Row("container engine", f"docker {version}", needed, PASS)]
        buildx = parse.buildx_version(host.out("buildx").text) if host.out("buildx").ok else d["buildx"]
        need = f"docker >= {docker['buildkit_default_from']} (BuildKit by default), for RUN --mount"
        found = f"docker {version}" + (f", buildx {buildx}" if buildx else ", no buildx")
        mm = parse.major_minor(version)
        if mm and mm >= parse.major_minor(docker["buildkit_default_from"]):
            build = Row("image build (BuildKit)", found, need, PASS, cite=docker.get("cite", []))
        elif buildx and f.get("env", {}).get("DOCKER_BUILDKIT") == "1":
            build = Row("image build (BuildKit)", found + ", DOCKER_BUILDKIT=1", need, PASS,
                        cite=docker.get("cite", []))
        elif host.out("image-inspect").ok:
            build = Row("image build (BuildKit)", found, need, NOTE, cite=docker.get("cite", []),
                        note=f"the image is there, so nothing is built; to rebuild it: {docker['buildkit_fix']}")
        else:
            build = Row("image build (BuildKit)", found, need, FAIL, cite=docker.get("cite", []),
                        fix=f"docker {version} builds without BuildKit, which the Dockerfiles' RUN --mount needs: "
                            f"{docker['buildkit_fix']}")
    return rows + [build]


def disk_row(host: Host, hostdata: dict[str, Any], platform: str) -> Row:
    f = host.facts
    d = hostdata["disk"][platform]
    if f.get("mode") == "native" and platform == "cpu":
        ready = f.get("venv", {}).get("python") and f.get("venv", {}).get("stamp_ok")
        need, basis = (d["run_gb"], d["run_basis"]) if ready else (d["native_gb"], d["native_basis"])
    elif f.get("mode") == "native":
        need, basis = d["run_gb"], d["run_basis"]
    elif host.out("image-inspect").ok:
        need, basis = d["run_gb"], "the image is there; " + d["run_basis"]
    else:
        need, basis = d["build_gb"], d["build_basis"]
    free, path = f.get("free_bytes"), f.get("disk_path", "?")
    needed = f">= {need} GB ({basis})"
    if free is None:
        return Row("free disk", f"unreadable at {path}", needed, NOTE, note=f"could not read the free space at {path}")
    found = f"{free / 1e9:.1f} GB free at {path}"
    if f.get("mode") == "container" and not f.get("engine"):
        found += " (no engine to say where it keeps images)"
    if free / 1e9 >= need:
        return Row("free disk", found, needed, PASS)
    return Row("free disk", found, needed, FAIL,
               fix=f"{path} has {free / 1e9:.1f} GB free, {need} GB are needed ({basis}): free "
                   f"{need - free / 1e9:.1f} GB there, or move the engine's storage to a larger disk")


def image_row(host: Host, platform: str) -> Row:
    f = host.facts
    image, base, n = f.get("image"), f.get("base_image"), f.get("wheelhouse_wheels", 0)
    check = "image (present or buildable)"
    lock = f"requirements/{platform}.txt"
    fix = f"run python3 tools/lock_requirements.py --only {platform} on a host that reaches that index"
    if not f.get("engine") or not host.out("engine-info").ok:
        if f.get("lock_incomplete"):  # whatever the engine, this host cannot build the image
            return Row(check, f"{image}: no container engine to ask; {lock} is incomplete for {f.get('machine')}",
                       "the image, or what builds it", FAIL,
                       fix=f"cannot build {image} here: {lock} is incomplete ({f['lock_incomplete']}); {fix}, or "
                           "pass --image REF")
        return Row(check, f"{image}: no container engine to ask", "the image, or what builds it", SKIP)
    if host.out("image-inspect").ok:
        return Row(check, f"{image} present", "the image, or what builds it", PASS)
    needed = f"Dockerfile.{platform}, its base and the locked wheels"
    if f.get("lock_incomplete"):
        return Row(check, f"{image} not built; {lock} is incomplete for {f.get('machine')}", needed, FAIL,
                   fix=f"cannot build {image}: {lock} is incomplete ({f['lock_incomplete']}); {fix}, or pass "
                       "--image REF")
    base_state = "present" if host.out("base-inspect").ok else "pulled from its registry (network)"
    wheels = f"wheelhouse/{platform} ({n} wheels, offline)" if n else "the indexes the lock names (network)"
    return Row(check, f"{image} not built yet; base {base}: {base_state}; wheels from {wheels}", needed, NEXT,
               note=f"next: ./reproduce.sh {platform}{' --container' if platform == 'cpu' else ''} --build builds "
                    f"{image} and stops (it prints the download, disk and time first), then --check again runs the "
                    "training steps in it")


def step_rows(host: Host, platform: str) -> list[Row]:
    out = []
    for fw in step.FRAMEWORKS:
        label = STEP_LABEL[fw] + (" + torch_npu" if (fw, platform) == ("pytorch", "ascend") else "")
        check = f"training step: {label}"
        needed = f"one SGD step of a tiny MLP on the {DEVICE[platform]}"
        res = host.out(f"step-{fw}")
        why = host.facts.get("step_not_run", {}).get(fw)
        if res.rc is None and why:
            # What --build makes is not there yet: the step runs after it (the check's next line says so).
            verdict = NEXT if why in NOT_BUILT or why.startswith("image") else SKIP
            out.append(Row(check, f"not run: {why}", needed, verdict))
            continue
        summary = step.summary(res.text)
        short = summary if len(summary) <= 200 else summary[:197] + "..."
        if res.ok:
            out.append(Row(check, summary, needed, PASS))
            continue
        cmd = shlex.join(host.facts.get("step_cmd", {}).get(fw, [])) or "python -m harness preflight-step"
        hint = ""
        if "invalid choice: 'preflight-step'" in res.text:
            hint = f"the image predates preflight-step: rebuild it (./reproduce.sh {platform} --build); "
        out.append(Row(check, summary, needed, FAIL,
                       fix=f"{label} failed one training step on the {DEVICE[platform]}: {short.rstrip('.')}; {hint}"
                           f"rerun it to see the whole output: {cmd}"))
    return out
