"""The check's allocator row: which allocator each framework's CPU cells get on this host against the expected
results' (docs/runs/cpu-quick), and, where tcmalloc is absent, what changes (from the committed measurements) and
the line that installs it. The run itself says the same line before it starts. The facts come from host.py's
collection (`allocator_host`: what the row reads, alone); the row reads nothing else."""

import subprocess
import sys

from harness.host import allocator
from harness.preflight import NOTE, PASS, checks_allocator, data
from harness.preflight import host as probe
from harness.preflight.host import Host, allocator_host
from tests.conftest import REPO

MEASURED = data.measured()


def test_a_host_with_the_expected_allocators_passes(monkeypatch):
    monkeypatch.setattr(allocator, "find_library", lambda name: f"/usr/lib/lib{name}.so")
    monkeypatch.delenv("HARNESS_ALLOCATOR", raising=False)
    here = allocator_host({})
    row = checks_allocator.row(here, MEASURED)
    assert row.verdict == PASS, row
    assert row.found == ("PyTorch's cells: tcmalloc; MindSpore's model cells: system; MindSpore's operator cells: "
                         "tcmalloc")
    assert checks_allocator.fix_line(here, MEASURED) == ""


def _which(*tools):
    """shutil.which on a host whose package managers are `tools` (other programs as this host has them)."""
    real = probe.shutil.which
    return lambda cmd, path=None: (f"/usr/bin/{cmd}" if cmd in tools else None) if cmd in probe.PACKAGE_TOOLS \
        else real(cmd, path=path)


def test_a_host_without_tcmalloc_is_told_what_changes_and_how_to_install_it(monkeypatch):
    monkeypatch.setattr(allocator, "find_library", lambda name: None)
    monkeypatch.setattr(probe.shutil, "which", _which("apt-get"))
    monkeypatch.delenv("HARNESS_ALLOCATOR", raising=False)
    row = checks_allocator.row(allocator_host({}), MEASURED)
    assert row.verdict == NOTE and row.ok()  # the run proceeds
    assert "PyTorch's cells get glibc-tuned, not tcmalloc" in row.note
    assert "MindSpore's operator cells get system, not tcmalloc" in row.note
    assert "MindSpore's model cells" not in row.note  # they get glibc's malloc either way
    # The size comes from the committed measurements, batch by batch.
    assert ("measured: PyTorch's ResNet50 on 2 cores under glibc-tuned ran at 0.93x at batch 16, 0.90x at batch 32, "
            "1.02x at batch 128 of its tcmalloc throughput") in row.note
    assert row.note.endswith("To match them: sudo apt-get install libtcmalloc-minimal4, or run in the image "
                             "(--container)")


def test_the_image_needs_no_allocator_row_beyond_saying_it_has_both():
    assert checks_allocator.row(Host("cpu", facts={"mode": "container"})).verdict == PASS


def test_the_line_before_a_native_run_on_such_a_host(tmp_path):
    """What reproduce.sh prints before a native cpu run: here HARNESS_ALLOCATOR stands in for the missing library.
    Both libraries are there whatever this host has (a conda environment's lib folder holding them, which the search
    reads last), so the one difference is the variable."""
    (tmp_path / "lib").mkdir()
    for name in ("libtcmalloc_minimal.so.4", "libjemalloc.so.2"):
        (tmp_path / "lib" / name).touch()
    proc = subprocess.run([sys.executable, "-m", "harness.preflight.checks_allocator"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={"HARNESS_ALLOCATOR": "glibc-tuned", "PATH": "/usr/bin:/bin",
                                                      "CONDA_PREFIX": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("reproduce.sh: note: this host's run will differ from the expected results: ")
    assert proc.stdout.strip().endswith("To match them: unset HARNESS_ALLOCATOR")


def test_the_install_line_names_the_host_package_manager(monkeypatch, tmp_path):
    """Debian/Ubuntu by package name (read from dpkg -L); Fedora/RHEL by the file's path, which dnf and yum resolve
    to the package that provides it; Arch through pacman's file database; a conda environment from conda-forge. The
    package managers and CONDA_PREFIX are the host's facts, as collected."""
    cases = {"apt-get": "sudo apt-get install libtcmalloc-minimal4",
             "dnf": "sudo dnf install /usr/lib64/libtcmalloc_minimal.so.4",
             "yum": "sudo yum install /usr/lib64/libtcmalloc_minimal.so.4",
             "pacman": "sudo pacman -S $(pacman -Fq libtcmalloc_minimal.so.4 | sort -u) (after `sudo pacman -Fy`)"}
    for tool, line in cases.items():
        (tmp_path / tool).mkdir()
        (tmp_path / tool / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool / tool).chmod(0o755)
        facts = allocator_host({"PATH": str(tmp_path / tool)}).facts
        assert facts["package_tools"] == {t: str(tmp_path / tool / t) if t == tool else None
                                          for t in probe.PACKAGE_TOOLS}
        assert checks_allocator.install_line(["tcmalloc"], facts["package_tools"]) == line
    facts = allocator_host({"PATH": str(tmp_path), "CONDA_PREFIX": "/opt/conda/envs/x"}).facts
    assert checks_allocator.install_line(["tcmalloc"], facts["package_tools"], facts["env"]["CONDA_PREFIX"]) == \
        "conda install -c conda-forge gperftools"
    assert "libtcmalloc_minimal.so.4" in checks_allocator.install_line(["tcmalloc"], {})


def test_a_conda_environment_lib_folder_is_searched(monkeypatch, tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libtcmalloc_minimal.so.4").write_bytes(b"")
    monkeypatch.setattr(allocator, "SEARCH", ())
    monkeypatch.setenv("CONDA_PREFIX", str(tmp_path))
    assert allocator.find_library("tcmalloc") == str(tmp_path / "lib" / "libtcmalloc_minimal.so.4")
    monkeypatch.delenv("CONDA_PREFIX")
    assert allocator.find_library("tcmalloc") is None
