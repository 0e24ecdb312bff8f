"""Ascend NPUs through `npu-smi`, the driver's documented command-line tool.

Two documented output forms are parsed:

- `npu-smi info`: the status table. One pair of rows per chip (NPU id, name, health, power, temperature,
  huge pages; then chip id [and Phy-ID or Device id], bus id, AICore %, memory and HBM usage), then a
  process table (NPU, chip, process id, name, device memory). The columns differ between products and
  driver versions: Ascend 910 (910A/910B/910ProB) shows `Memory-Usage(MB)` (the chip's DDR) and
  `HBM-Usage(MB)`; 910B1-B4 the same headers with DDR `0 / 0`; 310P only `Memory-Usage(MB)`; the 910_93
  (A3) and 310P Duo chips that share a card show power `-` or `NA` on all but one row. So the parser
  reads the column names from the table's own header rows instead of assuming positions.
- `npu-smi info -t usages -i ID` / `-t power -i ID`: `Key : value` lines, one block per chip ended by
  `Chip ID : N`. Key names differ too (`HBM Capacity(MB)` / `Memory Capacity(MB)` / `DDR Capacity(MB)`;
  `NPU Real-time Power(W)` on 910B, `Power Dissipation(W)` on older drivers and MCU rows).

Values the tool prints as `-`, `NA` or `N/A` become None: not measured is never 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

from harness.telemetry.sampler import Source, SourceUnavailable

MISSING = {"", "-", "NA", "N/A", "--"}
_PAIR = re.compile(r"(\S+?)\s*/\s*(\S+)|(\S+)")  # "3416 / 65536", "58626/ 65536", or a single value
_BUS = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Za-z]{2}:[0-9A-Za-z]{2}\.[0-9A-Za-z]$")
_KV = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
# Defaults for a table whose header rows are missing (a truncated capture): the 910-family layout.
_TOP_COLUMNS = ["Power(W)", "Temp(C)", "Hugepages-Usage(page)"]
_CHIP_COLUMNS = ["AICore(%)", "Memory-Usage(MB)", "HBM-Usage(MB)"]


def _number(text: str | None) -> float | None:
    if text is None or text.strip() in MISSING:
        return None
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None


def _cells(line: str) -> list[str] | None:
    """The cells of a `| a | b | c |` row; None for borders (+===+) and other lines."""
    s = line.strip()
    if not s.startswith("|"):
        return None
    parts = [p.strip() for p in s.strip("|").split("|")]
    return parts


def _values(cell: str, columns: list[str]) -> dict[str, Any]:
    """Assign a metrics cell to its header's column names: `X / Y` tokens go to the `*-Usage(...)`
    columns in order, single tokens to the other columns in order."""
    pairs, singles = [], []
    for m in _PAIR.finditer(cell):
        if m.group(3) is not None:
            singles.append(m.group(3))
        else:
            pairs.append((m.group(1), m.group(2)))
    out: dict[str, Any] = {}
    pair_cols = [c for c in columns if "Usage" in c]
    single_cols = [c for c in columns if c not in pair_cols]
    for col, tok in zip(single_cols, singles, strict=False):
        out[col] = _number(tok)
    for col, (used, total) in zip(pair_cols, pairs, strict=False):
        out[col] = (_number(used), _number(total))
    return out


def parse_info(text: str) -> dict[str, Any]:
    """`npu-smi info` -> {"version": str|None, "chips": [...], "processes": [...]}.

    Each chip: npu, chip, name, health, bus_id, phy_id (Phy-ID or Device column where printed),
    power_w, temp_c, aicore_pct, memory_used_mb/memory_total_mb (DDR), hbm_used_mb/hbm_total_mb, in
    the order the table lists them. Each process: npu, chip, pid, name, memory_mb."""
    version = None
    m = re.search(r"npu-smi\s+(\S+)", text)
    if m:
        version = m.group(1)
    top_cols, chip_cols = list(_TOP_COLUMNS), list(_CHIP_COLUMNS)
    chips: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    section = "devices"
    pending: dict[str, Any] | None = None
    for line in text.splitlines():
        cells = _cells(line)
        if not cells or not any(cells):
            continue
        first = cells[0]
        if len(cells) >= 3 and first.startswith("NPU") and "Name" in first:
            section, top_cols = "devices", cells[2].split()
            continue
        if len(cells) >= 3 and first.startswith("Chip") and "Bus-Id" in cells[1]:
            chip_cols = cells[2].split()
            continue
        if first.startswith("NPU") and any("Process" in c for c in cells[1:]):
            section = "processes"
            continue
        if first.startswith("npu-smi") or first.lower().startswith("no running"):
            continue
        if section == "processes":
            head = first.split()
            if len(cells) >= 4 and len(head) >= 2 and head[0].isdigit() and head[1].isdigit() \
                    and cells[1].strip().isdigit():
                processes.append({"npu": int(head[0]), "chip": int(head[1]), "pid": int(cells[1]),
                                  "name": cells[2], "memory_mb": _number(cells[3])})
            continue
        if len(cells) < 3:
            continue
        head = first.split()
        if not head or not head[0].isdigit():
            continue
        if pending is None or not _BUS.match(cells[1]):
            # First row of a chip: NPU id, name | health | power, temperature, huge pages.
            vals = _values(cells[2], top_cols)
            pending = {"npu": int(head[0]), "name": " ".join(head[1:]) or None, "health": cells[1] or None,
                       "power_w": vals.get("Power(W)"), "temp_c": vals.get("Temp(C)")}
            continue
        # Second row: chip id [Phy-ID / Device] | bus id | AICore %, memory, HBM.
        vals = _values(cells[2], chip_cols)
        mem = vals.get("Memory-Usage(MB)") or (None, None)
        hbm = vals.get("HBM-Usage(MB)") or (None, None)
        chips.append({**pending, "chip": int(head[0]),
                      "phy_id": int(head[1]) if len(head) > 1 and head[1].isdigit() else None,
                      "bus_id": cells[1], "aicore_pct": vals.get("AICore(%)"),
                      "memory_used_mb": mem[0], "memory_total_mb": mem[1],
                      "hbm_used_mb": hbm[0], "hbm_total_mb": hbm[1]})
        pending = None
    return {"version": version, "chips": chips, "processes": processes}


def parse_kv(text: str) -> list[dict[str, str]]:
    """`npu-smi info -t usages|power|common -i ID` -> one {key: value} per chip block. A block ends at
    its `Chip ID : N` line; keys before the first block that name the card (NPU ID, Chip Count) are
    repeated into every block."""
    blocks: list[dict[str, str]] = []
    card: dict[str, str] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        m = _KV.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key in ("NPU ID", "Chip Count") and not current:
            card[key] = value
            continue
        current[key] = value
        if key == "Chip ID":
            blocks.append({**card, **current})
            current = {}
    if current:  # no closing Chip ID line (some products print one chip without it)
        blocks.append({**card, **current})
    return blocks


POWER_KEYS = ("NPU Real-time Power(W)", "Power Dissipation(W)", "Real-time Power(W)", "Power(W)")


def usage_values(block: dict[str, str]) -> dict[str, float | None]:
    """Device memory from a `-t usages` block: HBM where the chip has it (910 family), else its memory
    (310P; called DDR on newer drivers). npu-smi gives capacity and a whole-percent usage rate here, so
    `device_memory_mb` is accurate to 1% of capacity; the table form gives MB."""
    def num(*keys):
        for k in keys:
            if k in block:
                return _number(block[k])
        return None

    hbm_cap, hbm_rate = num("HBM Capacity(MB)"), num("HBM Usage Rate(%)")
    mem_cap, mem_rate = num("Memory Capacity(MB)", "DDR Capacity(MB)"), num("Memory Usage Rate(%)", "DDR Usage Rate(%)")
    cap, rate = (hbm_cap, hbm_rate) if hbm_cap else (mem_cap, mem_rate)
    used = cap * rate / 100 if cap and rate is not None else None
    return {"device_memory_mb": used, "device_memory_total_mb": cap or None,
            "util_pct": num("Aicore Usage Rate(%)", "AICore Usage Rate(%)", "NPU Utilization(%)")}


def power_value(block: dict[str, str]) -> float | None:
    for k in POWER_KEYS:
        if k in block:
            return _number(block[k])
    return None


def chip_memory(chip: dict[str, Any]) -> tuple[float | None, float | None]:
    """(used, total) MB of the memory the chip computes from: HBM where it has any, else its DDR."""
    if chip.get("hbm_total_mb"):
        return chip.get("hbm_used_mb"), chip["hbm_total_mb"]
    return chip.get("memory_used_mb"), chip.get("memory_total_mb")


def physical_index(local_rank: int, env: dict[str, str] | None = None) -> int:
    """The chip a process with this local rank uses, in `npu-smi info` order: ASCEND_RT_VISIBLE_DEVICES
    remaps the runtime's logical ids like CUDA_VISIBLE_DEVICES does."""
    env = os.environ if env is None else env
    visible = [v.strip() for v in env.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if local_rank < len(visible) and visible[local_rank].isdigit():
        return int(visible[local_rank])
    return local_rank


def _user_note() -> str:
    """Why npu-smi may fail for this process's user, for the reason recorded with null readings. Ascend's
    documents give the driver's running user and group as HwHiAiUser and let a common (non-root) user
    call the DSMI interface npu-smi is built on (at most eight such callers per device at once); that a
    non-root container user in that group can run npu-smi was not verified on hardware."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return ""
    try:
        import grp

        groups = {grp.getgrgid(g).gr_name for g in os.getgroups()}
    except (ImportError, KeyError, OSError):
        groups = set()
    member = "in" if "HwHiAiUser" in groups else "not in"
    return (f" (running as uid {os.geteuid()}, {member} the HwHiAiUser group: npu-smi needs root or the driver's "
            "HwHiAiUser group; docker --group-add <its gid>, rootless podman --group-add keep-groups)")


class NpuSmiSource(Source):
    """One chip through `npu-smi info`. Which chip: the one whose process table lists this process (the
    reliable answer once the framework has opened the device), before that the chip at the process's
    logical index in table order (`physical_index`). If the table cannot be parsed at all, the key:value
    forms `-t usages -i ID` and `-t power -i ID` are used instead.

    npu-smi is a separate program that asks the driver, about 0.1-1 s per call on an 8-NPU host, so it
    is polled at most once a second by default (HARNESS_TELEMETRY_NPU_INTERVAL_S) in its own thread:
    a slow call delays neither training nor the host's RSS samples."""

    name = "npu-smi"
    scope = "device"

    def __init__(self, logical_index: int, pid: int | None = None, exe: str = "npu-smi", timeout_s: float = 10.0,
                 min_interval_s: float | None = None, run=None):
        self.index = logical_index
        self.pid = os.getpid() if pid is None else pid
        self.exe = exe
        self.timeout_s = timeout_s
        self.min_interval_s = (float(os.environ.get("HARNESS_TELEMETRY_NPU_INTERVAL_S", 1.0))
                               if min_interval_s is None else min_interval_s)
        self._run_cmd = run or self._subprocess
        self.mode = "table"
        self.selected: tuple[int, int] | None = None   # (npu, chip) found through the process table
        self.device: dict[str, Any] = {}

    def _subprocess(self, args: list[str]) -> str:
        p = subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=self.timeout_s)
        if p.returncode != 0:
            raise RuntimeError(f"{self.exe} {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[:200]}")
        return p.stdout

    def open(self) -> None:
        if self._run_cmd == self._subprocess and not shutil.which(self.exe):
            raise SourceUnavailable(f"{self.exe} is not on PATH (install the Ascend driver's tools)")
        try:
            table = parse_info(self._run_cmd(["info"]))
        except (OSError, subprocess.SubprocessError, RuntimeError) as e:
            raise SourceUnavailable(f"{self.exe} info failed: {e}{_user_note()}") from None
        if table["chips"]:
            chip = self._pick(table)
            if chip is None:
                raise SourceUnavailable(f"{self.exe} info lists {len(table['chips'])} chips, none for logical device "
                                        f"{self.index}")
            self.device = {"name": chip.get("name"), "npu": chip["npu"], "chip": chip["chip"],
                           "npu_smi_version": table["version"]}
            return
        self.mode = "kv"
        try:
            blocks = parse_kv(self._run_cmd(["info", "-t", "usages", "-i", str(self.index)]))
        except (OSError, subprocess.SubprocessError, RuntimeError) as e:
            raise SourceUnavailable(f"{self.exe} info shows no chip table and -t usages failed: {e}") from None
        if not blocks:
            raise SourceUnavailable(f"{self.exe}: neither `info` nor `info -t usages -i {self.index}` could be parsed")
        self.device = {"name": None, "npu": self.index, "chip": _number(blocks[0].get("Chip ID")), "mode": "kv"}

    def _pick(self, table: dict[str, Any]) -> dict[str, Any] | None:
        mine = [p for p in table["processes"] if p["pid"] == self.pid]
        if mine:
            self.selected = (mine[0]["npu"], mine[0]["chip"])
        if self.selected is not None:
            for c in table["chips"]:
                if (c["npu"], c["chip"]) == self.selected:
                    return c
        chips = table["chips"]
        return chips[self.index] if self.index < len(chips) else None

    def read(self) -> dict[str, Any]:
        if self.mode == "kv":
            usage = parse_kv(self._run_cmd(["info", "-t", "usages", "-i", str(self.index)]))
            power = parse_kv(self._run_cmd(["info", "-t", "power", "-i", str(self.index)]))
            out = usage_values(usage[0]) if usage else {}
            out["power_w"] = power_value(power[0]) if power else None
            return out
        table = parse_info(self._run_cmd(["info"]))
        chip = self._pick(table)
        if chip is None:
            raise RuntimeError(f"chip for logical device {self.index} not in the table")
        used, total = chip_memory(chip)
        proc = [p["memory_mb"] for p in table["processes"] if p["pid"] == self.pid and p["memory_mb"] is not None]
        self.device.update(npu=chip["npu"], chip=chip["chip"], name=chip.get("name"))
        return {"device_memory_mb": used, "device_memory_total_mb": total, "power_w": chip.get("power_w"),
                "util_pct": chip.get("aicore_pct"), "process_memory_mb": sum(proc) if proc else None}

    def info(self) -> dict[str, Any]:
        return {**self.device, "pid_found_in_process_table": self.selected is not None,
                "interval_s": self.min_interval_s}
