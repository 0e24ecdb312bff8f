"""Pure parsers of what the probes bring back (text in, plain values out; no I/O). Each reads the layout the tool
prints, as recorded in tests/fixtures/preflight/ (layouts from public outputs, see its README), and returns None
or empty values for what the text does not say, never a guess.
"""

from __future__ import annotations

import re
from typing import Any

# --- NVIDIA ---------------------------------------------------------------------------------------------------

QUERY_FIELDS = ("name", "compute_cap", "driver_version", "memory.total")
QUERY_FIELDS_OLD = ("name", "driver_version", "memory.total")  # R470's nvidia-smi has no compute_cap field


def unsupported_field(text: str) -> bool:
    """nvidia-smi's answer to a --query-gpu field its version does not know."""
    return "is not a valid field to query" in text


def nvidia_smi_query(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=<fields> --format=csv,noheader` -> one dict per GPU: name, compute_cap (or None),
    driver_version, memory_mib (int or None). Lines with another number of fields are not GPUs (errors)."""
    gpus = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields) or not cells[0]:
            continue
        row = {f: cells[i] for i, f in enumerate(fields)}
        if not re.match(r"^\d+(\.\d+)+$", row.get("driver_version", "")):
            continue
        mem = re.match(r"^(\d+)\s*MiB$", row.get("memory.total", ""))
        gpus.append({"name": row["name"], "compute_cap": row.get("compute_cap"),
                     "driver_version": row["driver_version"], "memory_mib": int(mem.group(1)) if mem else None})
    return gpus


def nvidia_smi_banner(text: str) -> dict[str, str | None]:
    """Plain `nvidia-smi`: the driver version and the newest CUDA it supports, from the banner line
    `| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.2 |`."""
    drv = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return {"driver_version": drv.group(1) if drv else None, "cuda_version": cuda.group(1) if cuda else None}


def nvidia_ctk_version(text: str) -> str | None:
    """`nvidia-ctk --version`: `NVIDIA Container Toolkit CLI version 1.17.6`."""
    m = re.search(r"version\s+v?(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


# --- container engines ------------------------------------------------------------------------------------------


def docker_info(text: str) -> dict[str, Any]:
    """`docker info`: server version (None when the daemon did not answer), runtimes, default runtime, storage
    root, the buildx CLI plug-in's version (from the Client's Plugins list) and CDI spec directories."""
    def field(name: str) -> str | None:
        m = re.search(rf"^\s*{re.escape(name)}:[ \t]*(.*?)\s*$", text, re.M)
        return m.group(1) if m and m.group(1) else None

    buildx = re.search(r"^\s*buildx:.*\n\s*Version:\s*(\S+)", text, re.M)
    cdi = re.search(r"^\s*CDI spec directories:\s*\n((?:\s{2,}/\S+\s*\n)+)", text, re.M)
    runtimes = field("Runtimes")
    return {"server_version": field("Server Version"), "runtimes": runtimes.split() if runtimes else [],
            "default_runtime": field("Default Runtime"), "root_dir": field("Docker Root Dir"),
            "buildx": buildx.group(1) if buildx else None,
            "cdi_dirs": cdi.group(1).split() if cdi else []}


def buildx_version(text: str) -> str | None:
    """`docker buildx version`: `github.com/docker/buildx v0.11.2 9872040`."""
    m = re.search(r"buildx\s+(v?\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def podman_version(text: str) -> str | None:
    """`podman version`: the first `Version:` line (the client's; podman 4 prints `Client: Podman Engine` first)."""
    m = re.search(r"^\s*Version:\s*(\d+(?:\.\d+)+\S*)", text, re.M)
    return m.group(1) if m else None


def podman_graph_root(text: str) -> str | None:
    """`podman info`: where images are stored (`graphRoot: /var/lib/containers/storage`)."""
    m = re.search(r"^\s*graphRoot:\s*(\S+)", text, re.M)
    return m.group(1) if m else None


def major_minor(version: str | None) -> tuple[int, int] | None:
    """"24.0.7" / "28.0.0-rc.1" / "v0.11.2" -> (24, 0)."""
    m = re.match(r"^v?(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


# --- Ascend -----------------------------------------------------------------------------------------------------


def version_info(text: str) -> dict[str, str]:
    """/usr/local/Ascend/{driver,firmware}/version.info: `key=value` lines (`Version=24.1.rc2`,
    `package_version=23.0.7`, `compatible_version_fw=[7.0.0,7.7.99]`)."""
    out = {}
    for line in text.splitlines():
        k, sep, v = line.strip().partition("=")
        if sep and k and " " not in k:
            out[k] = v.strip()
    return out


def version_range(text: str | None) -> tuple[str, str] | None:
    """`[7.0.0,7.7.99]` -> ("7.0.0", "7.7.99"); the first range where several are listed."""
    m = re.search(r"\[\s*([^,\]\s]+)\s*,\s*([^,\]\s]+)\s*\]", text or "")
    return (m.group(1), m.group(2)) if m else None


def npu_smi_info(text: str) -> dict[str, Any]:
    """`npu-smi info` -> {"version": the `Version:` of its banner (the driver's), "names": the Name column of each
    NPU's first row, in order}. A first row has an NPU number, then a name with a letter
    (`| 0     910ProB    | OK | ...`), as reproduce.sh reads it; the process table's rows have two numbers."""
    m = re.search(r"npu-smi\s+\S+\s+Version:\s*(\S+)", text)
    names = []
    for line in text.splitlines():
        cells = line.strip().strip("|").split("|")
        if len(cells) < 3:
            continue
        head = cells[0].split()
        if len(head) >= 2 and head[0].isdigit() and re.search(r"[A-Za-z]", head[1]):
            names.append(head[1])
    return {"version": m.group(1) if m else None, "names": names}


def ascend_chip(names: list[str], stacks: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    """The ASCEND_CHIP value for the NPU names `npu-smi info` lists (ascend.toml's npu_smi_names), or None and why."""
    kinds = sorted(set(names))
    if not kinds:
        return None, "npu-smi info lists no NPU name: check the driver, or set ASCEND_CHIP"
    if len(kinds) > 1:
        return None, f"npu-smi info lists several chip types ({', '.join(kinds)}); set ASCEND_CHIP"
    for chip, stack in stacks.items():
        if kinds[0] in stack["npu_smi_names"]:
            return chip, ""
    built = ", ".join(f"{c} ({'/'.join(s['npu_smi_names'])})" for c, s in sorted(stacks.items()))
    return None, f"chip {kinds[0]} has no image here: Dockerfile.ascend builds for {built}; see ARTIFACT.md"
