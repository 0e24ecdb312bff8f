"""Verdicts for a CUDA host: the GPU, the driver against each framework's CUDA build, the driver branch against the
GPU's architecture, each framework's GPU code against the GPU, GPU access for containers. Facts from the `Host`
(harness/preflight/host.py), minimums from cuda.toml (harness/preflight/data.py); no I/O here.

Pass with a note vs fail, from NVIDIA's documents (cited in cuda.toml):
- driver >= the toolkit's listed driver: pass;
- between the CUDA major release's minor-version-compatibility minimum and that: pass with a note (it runs
  "with limited feature-set", untested here);
- below that minimum: fail.
"""

from __future__ import annotations

import re
from typing import Any

from harness.preflight import FAIL, NOTE, PASS, SKIP, Row, parse, versions
from harness.preflight.host import Host

NO_GPU = ("no NVIDIA GPU visible (nvidia-smi -L lists none, no {dev}/nvidia[0-9]*); run on a GPU host with the "
          "NVIDIA driver and container toolkit, or choose cpu")


def gpus(host: Host, cuda: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The GPUs nvidia-smi lists, each with its compute capability (asked, or looked up by name for drivers
    that cannot say), and what nvidia-smi said when it listed none."""
    q = host.out("nvidia-smi-query")
    if q.rc is None:
        return [], "nvidia-smi: not found"
    rows = parse.nvidia_smi_query(q.text) if q.ok else []
    if parse.unsupported_field(q.text):
        old = host.out("nvidia-smi-query-old")
        rows = parse.nvidia_smi_query(old.text, parse.QUERY_FIELDS_OLD) if old.ok else []
        table = cuda["gpu_compute_capability"]["names"]
        for g in rows:
            words = re.split(r"[^A-Za-z0-9]+", g["name"])
            g["compute_cap"] = next((table[w] for w in words if w in table), None)
            g["cc_by_name"] = True
    if rows:
        return rows, ""
    return [], f"nvidia-smi: {q.first_line() or 'lists no GPU'}"


def _models(gs: list[dict[str, Any]]) -> str:
    seen: dict[str, int] = {}
    for g in gs:
        key = g["name"] + (f" ({g['memory_mib']} MiB" if g["memory_mib"] else " (") + \
            f", compute capability {g['compute_cap'] or 'unknown'})"
        seen[key] = seen.get(key, 0) + 1
    return "; ".join(f"{n} x {k}" for k, n in seen.items())


def rows(host: Host, cuda: dict[str, Any]) -> list[Row]:
    gs, said = gpus(host, cuda)
    dev = host.facts.get("dev_dir", "/dev")
    out = []
    if gs:
        out.append(Row("NVIDIA GPU", _models(gs), "a GPU that nvidia-smi lists", PASS))
    elif not host.facts.get("nvidia_devices"):
        out.append(Row("NVIDIA GPU", f"{said}; no {dev}/nvidia[0-9]*", "a GPU that nvidia-smi lists", FAIL,
                       fix=NO_GPU.format(dev=dev), last=True))
    elif said == "nvidia-smi: not found":
        out.append(Row("NVIDIA GPU", f"{said}; {host.facts['nvidia_devices']} {dev}/nvidia[0-9]*",
                       "a GPU that nvidia-smi lists", FAIL,
                       fix="nvidia-smi is not installed although the GPU device files exist: install the NVIDIA "
                           "driver's utilities (nvidia-smi comes with the driver)"))
    else:
        out.append(Row("NVIDIA GPU", said, "a GPU that nvidia-smi lists", FAIL,
                       fix=f"nvidia-smi lists no GPU ({said}): reload or reinstall the NVIDIA driver until "
                           "nvidia-smi lists the GPUs"))
    driver = gs[0]["driver_version"] if gs else None
    banner = parse.nvidia_smi_banner(host.out("nvidia-smi").text)
    limit = cuda["branch_limit"]
    below = versions.cc_tuple(limit["below_cc"])
    old = [g for g in gs if (versions.cc_tuple(g["compute_cap"] or "") or (99, 0)) < below]
    for fw in cuda["frameworks"].values():
        out.append(_driver_row(fw, cuda["toolkits"][fw["toolkit"]], driver, banner, old, limit))
    out.append(_branch_row(driver, gs, old, limit))
    for fw in cuda["frameworks"].values():
        out.append(_code_row(fw, gs))
    return out


def _driver_row(fw: dict, tk: dict, driver: str | None, banner: dict, old: list, limit: dict) -> Row:
    check = f"driver for {fw['label']}"
    needed = (f">= {tk['min_driver']} ({tk['label']}); >= {tk['compat_min_driver']} through CUDA minor-version "
              "compatibility")
    if not driver:
        return Row(check, "no driver version (no GPU listed)", needed, SKIP, cite=tk["cite"])
    cuda_max = f", nvidia-smi: CUDA {banner['cuda_version']}" if banner["cuda_version"] else ""
    found = f"{driver} (R{versions.branch(driver)}{cuda_max})"
    if versions.at_least(driver, tk["min_driver"]):
        return Row(check, found, needed, PASS, cite=tk["cite"])
    if versions.at_least(driver, tk["compat_min_driver"]):
        return Row(check, found, needed, NOTE, cite=tk["cite"],
                   note=f"driver {driver} is older than {tk['min_driver']}, the one NVIDIA lists for {tk['label']}; "
                        f"{fw['label']} runs on it through CUDA minor-version compatibility, \"with limited "
                        f"feature-set\" (no JIT of PTX newer than the driver), not tested here; {tk['min_driver']} "
                        "or newer is what its libraries were built for")
    upgrade = f"install NVIDIA driver {tk['min_driver']} or newer"
    if old:
        upgrade += (f", on branch R{limit['last_branch']} or older: R{limit['last_branch']} is the last branch that "
                    f"supports {limit['architectures']}, and this host has {old[0]['name']} (compute capability "
                    f"{old[0]['compute_cap']})")
    return Row(check, found, needed, FAIL, cite=tk["cite"],
               fix=f"{fw['label']} needs NVIDIA driver {tk['compat_min_driver']} or newer ({tk['label']}: "
                   f"{tk['min_driver']}); this host has {driver}: {upgrade}")


def _branch_row(driver: str | None, gs: list, old: list, limit: dict) -> Row:
    check = "driver branch for the GPU architecture"
    needed = (f"R{limit['last_branch']} or older for {limit['architectures']} (compute capability below "
              f"{limit['below_cc']}); any branch for newer GPUs")
    if not driver:
        return Row(check, "no driver version (no GPU listed)", needed, SKIP, cite=limit["cite"])
    br = versions.branch(driver)
    if not old:
        return Row(check, f"R{br}; no GPU below compute capability {limit['below_cc']}", needed, PASS,
                   cite=limit["cite"])
    found = f"R{br} with {old[0]['name']} (compute capability {old[0]['compute_cap']})"
    if br is not None and br <= limit["last_branch"]:
        return Row(check, found, needed, PASS, cite=limit["cite"])
    return Row(check, found, needed, FAIL, cite=limit["cite"],
               fix=f"driver branch R{br} does not support {old[0]['name']}: {limit['architectures']} end with "
                   f"R{limit['last_branch']}; install a {limit['last_branch']}.xx driver")


def code_for(cc: str | None, sass: list[str], ptx: list[str]) -> tuple[str, str]:
    """(verdict, what runs) for a GPU of compute capability `cc`: machine code of the same major version and an
    equal or lower minor version, else PTX of an equal or lower compute capability (JIT-compiled by the driver)."""
    c = versions.cc_tuple(cc or "")
    if c is None:
        return NOTE, "compute capability unknown: not checked"

    def arch(s: str) -> tuple[int, int]:
        d = s.split("_")[1]
        return int(d[:-1]), int(d[-1])

    runs = [s for s in sass if arch(s)[0] == c[0] and arch(s)[1] <= c[1]]
    if runs:
        return PASS, f"machine code {max(runs, key=arch)}"
    jit = [p for p in ptx if arch(p) <= c]
    if jit:
        return NOTE, f"PTX {max(jit, key=arch)}, JIT-compiled by the driver on first use"
    return FAIL, "no code it can run"


def _code_row(fw: dict, gs: list) -> Row:
    check = f"GPU code in {fw['label'].split(' (')[0]}"
    needed = f"SASS {' '.join(fw['sass'])}" + (f"; PTX {' '.join(fw['ptx'])}" if fw["ptx"] else "; no PTX")
    if not gs:
        return Row(check, "no GPU listed", needed, SKIP)
    verdict, found, fix, note = PASS, [], "", ""
    for g in {g["name"]: g for g in gs}.values():
        v, what = code_for(g["compute_cap"], fw["sass"], fw["ptx"])
        found.append(f"{g['name']} ({g['compute_cap'] or '?'}): {what}")
        if v == FAIL:
            verdict = FAIL
            fix = (f"{fw['label']} has no GPU code that a {g['name']} (compute capability {g['compute_cap']}) can run "
                   f"({needed}, in {fw['library']}); use a GPU it covers (docs/platforms/cuda.md)")
        elif v == NOTE and verdict == PASS:
            verdict = NOTE
            note = (f"{fw['label']} on {g['name']}: {what}" + ("" if "unknown" in what else
                    "; the first epoch of its first cell pays the compilation (cached in the run folder)"))
    return Row(check, "; ".join(found), needed, verdict, fix=fix, note=note,
               cite=["artifact-fatbin", "binary-compatibility"])


def container_access_row(host: Host, hostdata: dict) -> Row:
    check = "GPU access for containers"
    engine = host.facts.get("engine")
    tk = hostdata["nvidia_container_toolkit"]
    ctk = parse.nvidia_ctk_version(host.out("nvidia-ctk").text) if host.out("nvidia-ctk").ok else None
    if not engine or not host.out("engine-info").ok:
        return Row(check, "no container engine", "NVIDIA Container Toolkit (docker) or a CDI spec (podman)", SKIP)
    if engine.endswith("podman"):
        specs = host.facts.get("cdi_specs", [])
        found = (f"CDI spec {', '.join(specs)}" if specs else "no CDI spec") + (f"; nvidia-ctk {ctk}" if ctk else "")
        needed = f"a CDI spec for the GPUs ({' or '.join(tk['cdi_specs'])})"
        if specs:
            return Row(check, found, needed, PASS, cite=tk["cite"])
        return Row(check, found, needed, FAIL, cite=tk["cite"],
                   fix=f"podman finds no NVIDIA CDI spec: {tk['podman_fix']}")
    info = parse.docker_info(host.out("engine-info").text)
    hook = host.facts.get("runtime_hook")
    found = f"docker runtimes: {' '.join(info['runtimes']) or 'none listed'}" + (f"; nvidia-ctk {ctk}" if ctk else "")
    needed = "the NVIDIA Container Toolkit (docker --gpus all): the nvidia runtime or its hook"
    if "nvidia" in info["runtimes"] or hook:
        return Row(check, found, needed, PASS, cite=tk["cite"])
    return Row(check, found, needed, FAIL, cite=tk["cite"],
               fix=f"docker cannot pass GPUs (`--gpus all`) without the NVIDIA Container Toolkit: {tk['docker_fix']}")
