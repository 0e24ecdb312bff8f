"""The allocator each cell's process gets (harness/host/allocator.py): the choice, its environment, that the preload
really takes effect in a child process, and the one-line errors for a bad HARNESS_ALLOCATOR."""

import os
import subprocess
import sys

import pytest

from harness.errors import HarnessError
from harness.host import allocator


@pytest.fixture
def libs(tmp_path, monkeypatch):
    """A host whose library folder is tmp_path: add files to make an allocator 'installed'."""
    monkeypatch.setattr(allocator, "SEARCH", (str(tmp_path),))
    monkeypatch.delenv("HARNESS_ALLOCATOR", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    return tmp_path


def test_auto_takes_the_first_allocator_the_host_has(libs):
    assert allocator.choose("pytorch") == ("glibc-tuned", allocator.GLIBC_TUNED)  # neither library installed
    (libs / "libjemalloc.so.2").write_bytes(b"")  # measured slower than glibc's tunables: never chosen by auto
    assert allocator.choose("pytorch") == ("glibc-tuned", allocator.GLIBC_TUNED)
    (libs / "libtcmalloc_minimal.so.4").write_bytes(b"")  # tcmalloc first, as PyTorch's own launcher
    assert allocator.choose("pytorch") == ("tcmalloc", {"LD_PRELOAD": str(libs / "libtcmalloc_minimal.so.4")})
    assert allocator.choose("mindspore")[0] == allocator.PREFERENCE["mindspore"][0]


def test_operator_cells_on_cpu_give_mindspore_the_allocator_pytorchs_cells_have(libs):
    """Under glibc MindSpore's operator processes differ by their buffers' layout (docs/methodology/operators.md,
    item 11): its operator cells on a CPU host take tcmalloc, else jemalloc; its model cells and other platforms keep
    glibc."""
    assert allocator.choose("mindspore", kind="operator") == ("system", {})  # neither library installed
    (libs / "libjemalloc.so.2").write_bytes(b"")
    name, env = allocator.choose("mindspore", kind="operator")
    assert name == "jemalloc" and env["MALLOC_CONF"] == allocator.JEMALLOC_CONF
    (libs / "libtcmalloc_minimal.so.4").write_bytes(b"")
    tcmalloc = ("tcmalloc", {"LD_PRELOAD": str(libs / "libtcmalloc_minimal.so.4")})
    assert allocator.choose("mindspore", kind="operator") == tcmalloc == allocator.choose("pytorch", kind="operator")
    assert allocator.choose("mindspore") == ("system", {})  # a model cell
    assert allocator.choose("mindspore", platform="cuda", kind="operator") == ("system", {})
    assert allocator.choose("mindspore", "glibc-tuned", kind="operator")[0] == "glibc-tuned"  # by name, as ever


def test_jemalloc_keeps_large_buffers_as_pytorchs_launcher_configures_it(libs, monkeypatch):
    """jemalloc's defaults hand every free of over 8 MiB back to the kernel (measured: ResNet50 at 0.74 of the plain
    loop); PyTorch's launcher sets MALLOC_CONF whenever it preloads jemalloc: the same string, as the wheel's launcher
    sets it."""
    run_cpu = pytest.importorskip("torch.backends.xeon.run_cpu")
    with monkeypatch.context() as m:   # the launcher preloading jemalloc (one named in LD_PRELOAD: no library search)
        m.setenv("LD_PRELOAD", str(libs / "libjemalloc.so"))
        m.setenv("MALLOC_CONF", "")
        m.delenv("MALLOC_CONF")   # unset, and unset again after the block: the launcher writes os.environ itself
        launcher = run_cpu._Launcher.__new__(run_cpu._Launcher)   # its __init__ reads the CPUs: not needed here
        launcher.set_memory_allocator(enable_tcmalloc=False, enable_jemalloc=True)
        assert os.environ["MALLOC_CONF"] == allocator.JEMALLOC_CONF
    assert "MALLOC_CONF" not in os.environ and "LD_PRELOAD" not in os.environ
    (libs / "libjemalloc.so.2").write_bytes(b"")
    monkeypatch.setenv("HARNESS_ALLOCATOR", "jemalloc")
    assert allocator.choose("pytorch")[1]["MALLOC_CONF"] == allocator.JEMALLOC_CONF
    monkeypatch.setenv("MALLOC_CONF", "narenas:2")  # the user's own wins
    assert allocator.choose("pytorch")[1]["MALLOC_CONF"] == "narenas:2"


def test_a_preload_already_set_is_kept_after_the_allocator(libs, monkeypatch):
    (libs / "libtcmalloc_minimal.so.4").write_bytes(b"")
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    assert allocator.choose("pytorch")[1]["LD_PRELOAD"] == f"{libs / 'libtcmalloc_minimal.so.4'} /opt/other.so"


def test_harness_allocator_overrides_and_is_recorded(libs, monkeypatch):
    monkeypatch.setenv("HARNESS_ALLOCATOR", "system")
    assert allocator.process_env("pytorch") == {"HARNESS_ALLOCATOR_USED": "system"}
    monkeypatch.setenv("HARNESS_ALLOCATOR", "glibc-tuned")
    env = allocator.process_env("mindspore")
    assert env["HARNESS_ALLOCATOR_USED"] == "glibc-tuned" and int(env["MALLOC_MMAP_THRESHOLD_"]) >= 1 << 30


@pytest.mark.parametrize("value, words", [("jemallocc", "choose one of auto, system"),
                                          ("jemalloc", "install it (Debian: libjemalloc2)"),
                                          ("tcmalloc", "libtcmalloc-minimal4")])
def test_bad_or_missing_allocator_is_one_line_naming_the_fix(libs, monkeypatch, value, words):
    monkeypatch.setenv("HARNESS_ALLOCATOR", value)
    with pytest.raises(HarnessError) as e:
        allocator.choose("pytorch")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_backends_give_their_cells_the_allocator(libs, monkeypatch):
    from harness.frameworks import mindspore, pytorch

    (libs / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert pytorch.process_env("cpu")["HARNESS_ALLOCATOR_USED"] == "tcmalloc"
    assert pytorch.process_env("cuda")["LD_PRELOAD"] == str(libs / "libtcmalloc_minimal.so.4")
    assert mindspore.process_env("cpu")["HARNESS_ALLOCATOR_USED"] == allocator.PREFERENCE["mindspore"][0]
    assert mindspore.process_env("cpu", "operator")["LD_PRELOAD"] == str(libs / "libtcmalloc_minimal.so.4")
    assert "LD_PRELOAD" not in mindspore.process_env("cuda", "operator")


@pytest.mark.parametrize("name", ["jemalloc", "tcmalloc"])
def test_the_preload_is_in_the_child_process(name, monkeypatch):
    """Not only the variable: the library is mapped into a process started with the environment."""
    if not allocator.find_library(name):
        pytest.skip(f"no {name} on this host (tools/install_system_packages.sh installs it)")
    monkeypatch.setenv("HARNESS_ALLOCATOR", name)
    env = {**os.environ, **allocator.process_env("pytorch")}
    maps = subprocess.run([sys.executable, "-c", "print(open('/proc/self/maps').read())"], env=env,
                          capture_output=True, text=True, check=True).stdout
    assert allocator.LIBRARIES[name][0].split(".so")[0] in maps


def test_env_json_names_the_allocator_of_model_and_of_operator_cells(libs):
    from harness.host import envinfo

    (libs / "libtcmalloc_minimal.so.4").write_bytes(b"")
    got = envinfo.capture(probe_frameworks=False)["allocators"]
    assert got["per_framework"] == {"pytorch": "tcmalloc", "mindspore": "system"}
    assert got["operator_cells_on_cpu"] == {"pytorch": "tcmalloc", "mindspore": "tcmalloc"}
