"""The check's allocator row: which allocator each framework's CPU cells get on this host against the expected
results' (docs/runs/cpu-quick), and, where tcmalloc is absent, what changes (from the committed measurements) and
the line that installs it. The run itself says the same line before it starts."""

import subprocess
import sys

from harness.host import allocator
from harness.preflight import NOTE, PASS, checks_allocator
from tests.conftest import REPO


def test_a_host_with_the_expected_allocators_passes(monkeypatch):
    monkeypatch.setattr(allocator, "find_library", lambda name: f"/usr/lib/lib{name}.so")
    monkeypatch.delenv("HARNESS_ALLOCATOR", raising=False)
    row = checks_allocator.row({})
    assert row.verdict == PASS, row
    assert row.found == ("PyTorch's cells: tcmalloc; MindSpore's model cells: system; MindSpore's operator cells: "
                         "tcmalloc")
    assert checks_allocator.fix_line({}) == ""


def test_a_host_without_tcmalloc_is_told_what_changes_and_how_to_install_it(monkeypatch):
    monkeypatch.setattr(allocator, "find_library", lambda name: None)
    monkeypatch.setattr(checks_allocator.shutil, "which", lambda cmd: "/usr/bin/apt-get" if cmd == "apt-get" else None)
    monkeypatch.delenv("HARNESS_ALLOCATOR", raising=False)
    row = checks_allocator.row({})
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
    assert checks_allocator.row({}, container=True).verdict == PASS


def test_the_line_before_a_native_run_on_such_a_host():
    """What reproduce.sh prints before a native cpu run: here HARNESS_ALLOCATOR stands in for the missing library."""
    proc = subprocess.run([sys.executable, "-m", "harness.preflight.checks_allocator"], cwd=REPO, capture_output=True,
                          text=True, env={"HARNESS_ALLOCATOR": "glibc-tuned", "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("reproduce.sh: note: this host's run will differ from the expected results: ")
    assert proc.stdout.strip().endswith("To match them: unset HARNESS_ALLOCATOR")


def _only(tool):
    return lambda cmd: f"/usr/bin/{cmd}" if cmd == tool else None


def test_the_install_line_names_the_host_package_manager(monkeypatch):
    """Debian/Ubuntu by package name (read from dpkg -L); Fedora/RHEL by the file's path, which dnf and yum resolve
    to the package that provides it; Arch through pacman's file database; a conda environment from conda-forge."""
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    cases = {"apt-get": "sudo apt-get install libtcmalloc-minimal4",
             "dnf": "sudo dnf install /usr/lib64/libtcmalloc_minimal.so.4",
             "yum": "sudo yum install /usr/lib64/libtcmalloc_minimal.so.4",
             "pacman": "sudo pacman -S $(pacman -Fq libtcmalloc_minimal.so.4 | sort -u) (after `sudo pacman -Fy`)"}
    for tool, line in cases.items():
        monkeypatch.setattr(checks_allocator.shutil, "which", _only(tool))
        assert checks_allocator.install_line(["tcmalloc"]) == line
    monkeypatch.setattr(checks_allocator.shutil, "which", _only("none"))
    monkeypatch.setenv("CONDA_PREFIX", "/opt/conda/envs/x")
    assert checks_allocator.install_line(["tcmalloc"]) == "conda install -c conda-forge gperftools"
    monkeypatch.delenv("CONDA_PREFIX")
    assert "libtcmalloc_minimal.so.4" in checks_allocator.install_line(["tcmalloc"])


def test_a_conda_environment_lib_folder_is_searched(monkeypatch, tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libtcmalloc_minimal.so.4").write_bytes(b"")
    monkeypatch.setattr(allocator, "SEARCH", ())
    monkeypatch.setenv("CONDA_PREFIX", str(tmp_path))
    assert allocator.find_library("tcmalloc") == str(tmp_path / "lib" / "libtcmalloc_minimal.so.4")
    monkeypatch.delenv("CONDA_PREFIX")
    assert allocator.find_library("tcmalloc") is None
