"""The memory allocator each framework's CPU cells get on this host (harness/host/allocator.py's `auto`, which falls
back
silently where a library is absent) against the one the expected results were measured with (docs/runs/cpu-quick's
env.json). Where they differ, the row says what changes, from the committed measurements of PyTorch's ResNet50
under each allocator (docs/at-best/process_gap-resnet50-pytorch-*.json), and the line that installs the library.
A difference is a note, not a failure: the run proceeds, and its report says so.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from harness.host import allocator, configdiff
from harness.preflight import NOTE, PASS, Row

# The Debian/Ubuntu packages that ship the libraries allocator.LIBRARIES looks for (read from `dpkg -L` on Debian
# bookworm: libtcmalloc-minimal4 2.10 ships libtcmalloc_minimal.so.4, libjemalloc2 libjemalloc.so.2).
DEBIAN = {"tcmalloc": "libtcmalloc-minimal4", "jemalloc": "libjemalloc2"}
# conda-forge's package names (its gperftools and jemalloc feedstocks; not run here: no conda on this machine).
CONDA = {"tcmalloc": "gperftools", "jemalloc": "jemalloc"}
KINDS = configdiff.KINDS


def on_this_host(env: dict[str, str] | None = None) -> dict[tuple[str, str], str]:
    """{(framework, kind): allocator} as a cell of that kind gets it here (HARNESS_ALLOCATOR honoured: env's, else
    this process's)."""
    requested = (env or {}).get("HARNESS_ALLOCATOR")
    try:
        return {(fw, kind): allocator.choose(fw, requested, platform="cpu", kind=kind)[0] for fw, kind, _ in KINDS}
    except Exception:  # noqa: BLE001 - a bad HARNESS_ALLOCATOR is the run's one-line error, not the check's
        return {}


def expected() -> dict[tuple[str, str], str]:
    """{(framework, kind): allocator} of the committed CPU run the expected results come from."""
    folder = configdiff.expected_run("cpu", "quick")
    return configdiff.allocators(json.loads((folder / "env.json").read_text())) if folder else {}


def install_line(missing: list[str]) -> str:
    """The one line that installs the missing libraries with this host's package manager."""
    libs = [allocator.LIBRARIES[m][0] for m in missing]
    if shutil.which("apt-get"):
        return f"sudo apt-get install {' '.join(DEBIAN[m] for m in missing)}"
    for tool in ("dnf", "yum"):   # both install "the package that provides this file" when given a path
        if shutil.which(tool):
            return f"sudo {tool} install {' '.join('/usr/lib64/' + lib for lib in libs)}"
    if shutil.which("pacman"):    # Arch: its file database names the package that ships a library
        return f"sudo pacman -S $(pacman -Fq {' '.join(libs)} | sort -u) (after `sudo pacman -Fy`)"
    if os.environ.get("CONDA_PREFIX"):   # conda-forge's, into the environment (allocator.find_library looks there)
        return f"conda install -c conda-forge {' '.join(CONDA[m] for m in missing)}"
    return (f"install your distribution's package that ships {' and '.join(libs)} (Debian/Ubuntu: "
            f"{' '.join(DEBIAN[m] for m in missing)})")


def row(env: dict[str, str] | None = None, container: bool = False) -> Row:
    check, needed = "memory allocator (CPU cells)", "what the expected results used (docs/runs/cpu-quick)"
    if container:
        return Row(check, "the image installs tcmalloc and jemalloc", needed, PASS)
    got, want = on_this_host(env), expected()
    if not got or not want:
        return Row(check, "not read", needed, NOTE, note="the allocators could not be compared (HARNESS_ALLOCATOR, "
                                                         "or docs/runs/cpu-quick/env.json unreadable)")
    found = "; ".join(f"{label}: {got[(fw, kind)]}" for fw, kind, label in KINDS)
    needed = "the expected results': " + "; ".join(f"{label}: {want.get((fw, kind), '?')}"
                                                   for fw, kind, label in KINDS)
    differ = configdiff.allocator_changes(got, want)
    if not differ:
        return Row(check, found, needed, PASS)
    missing = sorted({w for *_, w in differ if w in allocator.LIBRARIES and not allocator.find_library(w)})
    what = "; ".join(f"{label} get {g}, not {w}" for _, _, label, g, w in differ)
    g_pt, w_pt = got[("pytorch", "model")], want[("pytorch", "model")]
    runs = configdiff.runs_effect(g_pt, w_pt)
    quoted = f"{runs['where']}: {runs['c1']}; {runs['figure5']}" if runs else ""
    size = "; ".join(filter(None, (configdiff.effect(g_pt, w_pt), quoted)))
    fix = (f"{install_line(missing)}, or run in the image (--container)" if missing
           else "unset HARNESS_ALLOCATOR")
    return Row(check, found, needed, NOTE,
               note=f"this host's run will differ from the expected results: {what}"
                    + (f" ({size})" if size else "") + f"; the report says so. To match them: {fix}")


def fix_line(env: dict[str, Any] | None = None) -> str:
    """One line for reproduce.sh to print before a native run whose allocators differ ("" when they match)."""
    r = row(env)
    return r.note if r.verdict == NOTE and "will differ" in r.note else ""


if __name__ == "__main__":  # reproduce.sh, before a native cpu run: the line, when this host differs
    line = fix_line(dict(os.environ))
    if line:
        print(f"reproduce.sh: note: {line}")


def tuning_row() -> Row:
    """Transparent huge pages and the CPU governor: what this host has; the expected results' runs did not record
    them, so a difference cannot be named, only the values shown (a run records them: the report compares)."""
    t = configdiff.host_tuning()
    found = "; ".join(f"{k.replace('_', ' ')}: {v or 'not readable'}" for k, v in t.items())
    return Row("host tuning", found, "recorded with each run (env.json host_tuning)", NOTE,
               note="the committed runs behind the expected results predate this record; nothing in the harness "
                    "sets or needs these, and their effect was not measured here")


def cpu_row() -> Row:
    """This host's CPU against the expected run's: another CPU moves every ratio on its own (measured: the CPU
    difference quoted from docs/runs/allocator, harness.host.configdiff)."""
    from harness.host.envinfo import cpu_model

    folder = configdiff.expected_run("cpu", "quick")
    want = (json.loads((folder / "env.json").read_text()).get("cpu") or {}) if folder else {}
    here = cpu_model()
    needed = f"the expected results': {want.get('model', '?')}, {want.get('cores', '?')} cores"
    found = f"{here}, {os.cpu_count()} cores"
    if here == want.get("model") and os.cpu_count() == want.get("cores"):
        return Row("CPU", found, needed, PASS)
    size = configdiff.runs_cpu_effect(here, want.get("model", ""))
    return Row("CPU", found, needed, NOTE,
               note="this host's ratios are not the expected results' to the digit: each framework's CPU kernels "
                    "dispatch by instruction set and cache sizes, and the intervals hold for one host"
                    + (f" ({size})" if size else "") + "; compare verdicts, and the report names the difference")
