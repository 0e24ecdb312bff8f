"""The device catalog (harness.devices.catalog): one table of devices that the memory rule, the peaks, the estimate and
the docs read, one way a name is matched to its row, one precision vocabulary; the device tools read in
harness.devices.query alone; and one way a duration is written (harness.results.units)."""

import os
from collections import Counter

import pytest

from harness.config import matrix as matrix_mod
from harness.devices import catalog, query
from harness.devices import memory as devicememory
from harness.docs import accelerator, render
from harness.estimate import booking
from harness.estimate import runtime as estimate
from harness.launch import progress
from harness.results import units
from tests.conftest import REPO

V100, A100, H100, H100P = (15.7e12, 125e12, None), (19.5e12, 312e12, 312e12), (67e12, 989e12, 989e12), \
    (51e12, 756e12, 756e12)

# name as a tool, a booking or a user gives it -> (memory size, kind, (fp32, fp16, bf16) peaks, bandwidth)
NAMES = {
    "Tesla V100-SXM2-16GB": ("V100-16", "V100", V100, 900e9),
    "Tesla V100-PCIE-32GB": ("V100-32", "V100", V100, 900e9),
    "Tesla V100-SXM2-32GB": ("V100-32", "V100", V100, 900e9),
    "Tesla V100S-PCIE-32GB": ("V100-32", "V100S", V100, 1134e9),
    "Tesla V100": (None, "V100", V100, 900e9),
    "NVIDIA A100-SXM4-40GB": ("A100-40", "A100", A100, 1555e9),
    "NVIDIA A100-SXM4-80GB": ("A100-80", "A100-SXM4-80GB", A100, 2039e9),
    "NVIDIA A100 80GB PCIe": ("A100-80", "A100 80GB PCIe", A100, 1935e9),
    "NVIDIA H100 80GB HBM3": ("H100-80", "H100", H100, 3.35e12),
    "NVIDIA H100 PCIe": ("H100-80", "H100 PCIe", H100P, 2.0e12),
    "NVIDIA H100 NVL": (None, "H100", H100, 3.35e12),
    "NVIDIA H200": ("H200-141", "H200", H100, 4.8e12),
    "NVIDIA H200 NVL": ("H200-141", "H200 NVL", (60e12, 835e12, 835e12), 4.8e12),
    "Ascend910": ("910-32", "Ascend910", (None, 256e12, None), None),
    "Ascend910B": ("910B-64", "Ascend910B", (None, None, None), None),
    "Ascend910B3": ("910B-64", "Ascend910B", (None, None, None), None),
    "V100-16": ("V100-16", "V100", V100, 900e9),
    "A100-80": ("A100-80", "A100", A100, 1555e9),
    "910-32": ("910-32", "Ascend910", (None, 256e12, None), None),
    "nvidia h200": ("H200-141", "H200", H100, 4.8e12),      # the case of a name does not matter
    "AMD EPYC 7B13": (None, "AMD EPYC 7B13", (None, None, None), None),   # a CPU: its own kind, no figures
}


@pytest.mark.parametrize("name", NAMES)
def test_one_match_gives_a_names_memory_kind_peaks_and_bandwidth(name):
    size, kind, (fp32, fp16, bf16), bandwidth = NAMES[name]
    assert (catalog.sized(name).name if catalog.sized(name) else None) == size
    assert catalog.kind(name) == kind
    assert (catalog.peak(name, "fp32"), catalog.peak(name, "fp16"), catalog.peak(name, "bf16")) == (fp32, fp16, bf16)
    assert catalog.bandwidth(name) == bandwidth
    # the modules that ask by name read the same row
    assert devicememory.table_gib(name) == ((float(catalog.CATALOG[size].gib), f"{size} as sold") if size else
                                            (None, f"{name} is not in the memory table"))
    assert catalog.kind(name) == kind


def test_the_table_is_one_table():
    assert catalog.match(None) is None and catalog.kind(None) is None and catalog.peak("", "fp32") is None
    assert catalog.match("NVIDIA H200 NVL").name == "H200 NVL"        # the longest fragment found wins
    assert catalog.match("Ascend910B3").name == "910B-64"
    # The memory table is the catalog's sizes, in its order; every variant is sold as one of them.
    assert devicememory.DEVICES == catalog.sizes()
    assert list(devicememory.DEVICES) == ["V100-16", "V100-32", "A100-40", "A100-80", "H100-80", "H200-141", "910-32",
                                          "910B-64"]
    for d in catalog.DEVICES:
        assert d.platform in ("cuda", "ascend")
        assert set(d.peaks) <= set(catalog.PRECISIONS), d.name
        assert (d.gib is None) == (not d.source), d.name
        assert d.sold is None or (d.gib is None and catalog.CATALOG[d.sold].gib), d.name
        assert catalog.match(d.name) is d and all(catalog.match(f) is d for f in d.names), d.name
    assert catalog.peak("H100 PCIe", "fp32") == 51e12 and catalog.peak("Ascend910B", "fp16") is None


def test_the_bookings_and_the_docs_hosts_name_the_catalogs_devices():
    assert booking.BOOKINGS == {"V100": ("cuda", "Tesla V100-SXM2-32GB", 1),
                                "V100-16": ("cuda", "V100-16", 1),
                                "V100-32": ("cuda", "Tesla V100-SXM2-32GB", 1),
                                "H100": ("cuda", "NVIDIA H100 80GB HBM3", 1), "H200": ("cuda", "NVIDIA H200", 1),
                                "910x8": ("ascend", "Ascend910", 8)}
    for key, (platform, name, _) in booking.BOOKINGS.items():
        assert catalog.match(name).platform == platform and catalog.sized(name) is not None, key
    booked = {b[1:] for b in booking.BOOKINGS.values()}
    assert {(device, n) for _, _, _, device, n in accelerator.HOSTS if device} <= booked


def test_one_precision_vocabulary():
    assert [catalog.precision(a) for a in catalog.AMP_LEVELS] == ["fp32", "fp16", "fp16", "fp16"]
    assert catalog.precision(None) == "fp32"
    # the memory predictions name their half-precision trace by how it was made (autocast); the same mapping
    assert [devicememory.precision(a) for a in catalog.AMP_LEVELS] == ["fp32", "amp", "amp", "amp"]
    assert set(catalog.TRACED) == {catalog.precision(a) for a in catalog.AMP_LEVELS}
    assert all(k in ("fp32", "amp") for k in devicememory.load()["models"]["bert"] if k in ("fp32", "amp", "fp16"))


def test_one_duration_format():
    assert [units.duration(s) for s in (0, 42, 59.6, 754, 3673, 36000)] == \
        ["0 s", "42 s", "1 min 00 s", "12 min 34 s", "1 h 01 min 13 s", "10 h 00 min 00 s"]
    assert render.duration is units.duration and progress.duration is units.duration
    assert booking.duration is units.duration and estimate.duration is units.duration


def test_a_reason_is_shortened_between_words_never_inside_one():
    """The quick profile's AMP reason (221 characters) in the runner's 200: it used to end "GCN's AMP cel"."""
    why = ("quick profile on a CPU: mixed precision there is half precision without matrix units, 4-9x slower than "
           "fp32 (2 cores: ResNet50 PyTorch O2 98 s, fp32 11 s), 8 of the profile's 15 minutes; GCN's AMP cells decide "
           "C3 on a CPU")
    assert units.brief(why, 200) == why[:why.index(" cells decide")] + "..."
    assert units.brief(why, 1000) == why and units.brief(" first\nsecond", 80) == "first" and units.brief("", 10) == ""
    assert units.brief("x" * 50, 20) == "x" * 17 + "...", "one word longer than the room: cut inside it"
    assert units.brief("a, b, c, d", 9) == "a, b...", "no comma left before the dots"


def test_the_device_tools_are_read_in_one_module(tmp_path, monkeypatch):
    fixtures = REPO / "tests" / "fixtures" / "npusmi"
    assert query.npu_chip((fixtures / "910b3_info.txt").read_text()) == "Ascend910B"
    assert query.npu_chip((fixtures / "910prob_info.txt").read_text()) == "Ascend910"
    assert query.npu_chip((fixtures / "310p3_info.txt").read_text()) is None
    # Fake tools on PATH: what each query makes of their output.
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    nvidia_smi = """case "$*" in
  *-L*) printf 'GPU 0: NVIDIA H200 (UUID: a)\\nGPU 1: NVIDIA H200 (UUID: b)\\n' ;;
  *name,driver*) printf 'NVIDIA H200, 570.1, 143771 MiB\\n' ;;
  *memory.total*) printf '143771\\n' ;;
  *) printf 'NVIDIA H200\\n' ;;
esac
"""
    for tool, text in {"nvidia-smi": nvidia_smi, "npu-smi": f'cat "{fixtures / "910b3_info.txt"}"\n'}.items():
        (bin_ / tool).write_text("#!/bin/sh\n" + text)
        (bin_ / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(query, "_nvml", lambda: None)
    assert query.device_name("cuda") == "NVIDIA H200" and query.device_name("ascend") == "Ascend910B"
    assert query.device_name("cpu") is None
    assert query.gpu_count() == 2
    assert query.nvidia_info() == {"gpus": [{"name": "NVIDIA H200", "driver": "570.1", "memory": "143771 MiB"}],
                                   "driver": "570.1"}
    assert query.host_memory("cuda") == (pytest.approx(143771 / 1024), "nvidia-smi")
    assert query.host_memory("ascend") == (64.0, "npu-smi info")
    assert query.npu_smi_info() == (fixtures / "910b3_info.txt").read_text().strip()
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert query.device_name("cuda") is None and query.gpu_count() is None and query.nvidia_info() is None
    assert query.npu_smi_info() is None


def test_an_estimate_asks_the_host_once_per_cell(monkeypatch):
    """booking.project asks each cell's verdict and plan once (runtime.plan's three estimates and the totals read
    them from there), and runtime.plan asks its `skip` once per cell."""
    from harness.host.plan import Host

    asked, inside = Counter(), []
    verdict, plan = Host.verdict, Host.plan

    def counted_verdict(self, cell):
        asked["verdict", cell.id] += 1
        inside.append(cell)
        try:
            return verdict(self, cell)
        finally:
            inside.pop()

    def counted_plan(self, cell):
        asked["plan", cell.id] += 0 if inside else 1   # Host.verdict's own question is Host's business
        return plan(self, cell)

    monkeypatch.setattr(Host, "verdict", counted_verdict)
    monkeypatch.setattr(Host, "plan", counted_plan)
    m = matrix_mod.load()
    folders, _ = estimate.references("cuda", "quick")
    p = booking.project(m, "quick", "cuda", run=folders, device=None, devices=1,
                        memory=devicememory.table_gib("V100-16"))
    cells = {c.id for c in m.expand("quick")}
    assert set(p["decisions"]) == cells
    assert asked == Counter({(q, c): 1 for c in cells for q in ("verdict", "plan")})

    skips = Counter()
    todo = matrix_mod.schedule(m.expand("quick"))
    estimate.plan(todo, folders, skip=lambda c: skips.update([c.id]), bounds=True)
    assert skips == Counter(cells)
