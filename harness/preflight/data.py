"""The preflight's minimums, read from its data files (each vendor fact is defined there once, with its source):

    cuda.toml    NVIDIA driver minimums per CUDA toolkit, the GPU code in each framework, the last driver branch
                 of old architectures, compute capability by GPU name
    ascend.toml  the stack per ASCEND_CHIP: npu-smi names, CANN / torch / torch_npu / MindSpore, HDK minimums
    host.toml    Python, disk per platform, docker (BuildKit), the NVIDIA Container Toolkit

and the committed measurements the CPU rows quote (`measured`): PyTorch's ResNet50 under each allocator and the
runs under docs/runs/allocator (harness.host.configdiff names the files).

Read with tomllib, or harness/preflight/minitoml.py on Pythons before 3.11. A file that lacks a key the checks
need is a `DataError` naming the file and the key (the preflight prints it as one `error:` line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.host import allocator, configdiff

HERE = Path(__file__).resolve().parent
ASCEND_KEYS = {"npu_smi_names": list, "cann": str, "torch": str, "torch_npu": str, "mindspore": str,
               "min_driver": str, "min_firmware": str, "sources": list}


class DataError(Exception):
    pass


def load(name: str, folder: Path = HERE) -> dict[str, Any]:
    path = folder / name
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        from harness.preflight import minitoml

        try:
            return minitoml.loads(text)
        except minitoml.TomlError as e:
            raise DataError(f"{path}: {e}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"{path}: {e}") from None


def _need(table: dict, keys: dict[str, Any], where: str) -> None:
    for key, kind in keys.items():
        if not isinstance(table.get(key), kind) or isinstance(table.get(key), bool):
            name = kind.__name__ if isinstance(kind, type) else "number"
            raise DataError(f"{where}: needs `{key}` ({name})")


def _check_cites(data: dict, where: str) -> None:
    sources = data.get("sources", {})
    for name, src in sources.items():
        _need(src, {"title": str, "url": str, "quote": str}, f"{where} [sources.{name}]")

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "cite":
                    for c in v:
                        if c not in sources:
                            raise DataError(f"{where} {path}: cites `{c}`, which has no [sources.{c}]")
                elif k != "sources":
                    walk(v, f"{path}.{k}" if path else k)

    walk(data, "")


def cuda(folder: Path = HERE) -> dict[str, Any]:
    d = load("cuda.toml", folder)
    where = str(folder / "cuda.toml")
    for name, tk in d.get("toolkits", {}).items():
        _need(tk, {"label": str, "min_driver": str, "compat_min_driver": str, "cite": list},
              f"{where} [toolkits.{name}]")
    if set(d.get("frameworks", {})) != {"pytorch", "mindspore"}:
        raise DataError(f"{where}: needs [frameworks.pytorch] and [frameworks.mindspore]")
    for name, fw in d["frameworks"].items():
        _need(fw, {"label": str, "toolkit": str, "sass": list, "ptx": list, "library": str},
              f"{where} [frameworks.{name}]")
        if fw["toolkit"] not in d["toolkits"]:
            raise DataError(f"{where} [frameworks.{name}]: toolkit `{fw['toolkit']}` has no [toolkits.*] table")
    _need(d.get("branch_limit", {}), {"below_cc": str, "architectures": str, "last_branch": int},
          f"{where} [branch_limit]")
    _need(d.get("gpu_compute_capability", {}), {"names": dict}, f"{where} [gpu_compute_capability]")
    _check_cites(d, where)
    return d


def ascend(folder: Path = HERE) -> dict[str, dict[str, Any]]:
    """{ASCEND_CHIP value: its stack}; only the schema's keys are read."""
    d = load("ascend.toml", folder)
    where = str(folder / "ascend.toml")
    chips = d.get("chip")
    if not isinstance(chips, dict) or not chips:
        raise DataError(f"{where}: needs [chip.<ASCEND_CHIP>] tables")
    out = {}
    for chip, stack in chips.items():
        _need(stack, ASCEND_KEYS, f"{where} [chip.{chip}]")
        out[chip] = {k: stack[k] for k in ASCEND_KEYS}
    return out


def host(folder: Path = HERE) -> dict[str, Any]:
    d = load("host.toml", folder)
    where = str(folder / "host.toml")
    _need(d.get("python", {}), {"version": str}, f"{where} [python]")
    for platform in ("cpu", "cuda", "ascend"):
        disk = d.get("disk", {}).get(platform, {})
        _need(disk, {"build_gb": (int, float), "build_basis": str, "run_gb": (int, float)},
              f"{where} [disk.{platform}]")
    for key in ("cpu-native", "cpu", "cuda", "ascend"):
        _need(d.get("build", {}).get(key, {}), {"download": str, "time": str}, f"{where} [build.{key}]")
    _need(d.get("docker", {}), {"buildkit_default_from": str, "install": str, "buildkit_fix": str},
          f"{where} [docker]")
    _need(d.get("nvidia_container_toolkit", {}), {"cdi_specs": list, "docker_fix": str, "podman_fix": str},
          f"{where} [nvidia_container_toolkit]")
    _check_cites(d, where)
    return d


def measured() -> dict[str, Any]:
    """{"throughput": {allocator: {batch: images/s}}, "runs": docs/runs/allocator/effect.json}, as committed
    ({} where a file is missing: the rows then quote nothing)."""
    return {"throughput": {name: configdiff.throughput(name) for name in allocator.CHOICES if name != "auto"},
            "runs": configdiff.allocator_runs()}


def source_line(data: dict[str, Any], name: str) -> str:
    s = data["sources"][name]
    return f"[{name}] {s['title']}, {s['url']}: \"{s['quote']}\""
