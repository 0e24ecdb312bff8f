"""The memory allocator each framework's CPU cells get on this host (harness/host/allocator.py's `auto`, which falls
back silently where a library is absent) against the one the expected results were measured with (the expected
run's env.json, as host.py recorded it). Where they differ, the row says what changes, from the committed
measurements of PyTorch's ResNet50 under each allocator (docs/at-best/process_gap-resnet50-pytorch-*.json) and the
runs under docs/runs/allocator (both read by data.measured()), and the line that installs the library. A difference
is a note, not a failure: the run proceeds, and its report says so. Beside it: the host's tuning and its CPU against
the expected run's. Facts from the `Host`, measurements passed in; no I/O here.
"""

from __future__ import annotations

import os
from typing import Any

from harness.host import allocator, configdiff
from harness.preflight import NOTE, PASS, Row
from harness.preflight.host import Host

# The Debian/Ubuntu packages that ship the libraries allocator.LIBRARIES looks for (read from `dpkg -L` on Debian
# bookworm: libtcmalloc-minimal4 2.10 ships libtcmalloc_minimal.so.4, libjemalloc2 libjemalloc.so.2).
DEBIAN = {"tcmalloc": "libtcmalloc-minimal4", "jemalloc": "libjemalloc2"}
# conda-forge's package names (its gperftools and jemalloc feedstocks; not run here: no conda on this machine).
CONDA = {"tcmalloc": "gperftools", "jemalloc": "jemalloc"}
KINDS = configdiff.KINDS
OLD_RECORDING = "a host recorded before the check gathered"   # ... what the row needs: the row says which


def _where(host: Host) -> str:
    """The expected run's folder, as the rows name it."""
    return f"docs/runs/{(host.facts.get('expected_run') or {}).get('name') or 'cpu-quick'}"


def install_line(missing: list[str], tools: dict[str, str | None], conda_prefix: str | None = None) -> str:
    """The one line that installs the missing libraries with this host's package manager (`tools`: which of them the
    host has, by name; `conda_prefix`: its CONDA_PREFIX)."""
    libs = [allocator.LIBRARIES[m][0] for m in missing]
    if tools.get("apt-get"):
        return f"sudo apt-get install {' '.join(DEBIAN[m] for m in missing)}"
    for tool in ("dnf", "yum"):   # both install "the package that provides this file" when given a path
        if tools.get(tool):
            return f"sudo {tool} install {' '.join('/usr/lib64/' + lib for lib in libs)}"
    if tools.get("pacman"):    # Arch: its file database names the package that ships a library
        return f"sudo pacman -S $(pacman -Fq {' '.join(libs)} | sort -u) (after `sudo pacman -Fy`)"
    if conda_prefix:   # conda-forge's, into the environment (allocator.find_library looks there)
        return f"conda install -c conda-forge {' '.join(CONDA[m] for m in missing)}"
    return (f"install your distribution's package that ships {' and '.join(libs)} (Debian/Ubuntu: "
            f"{' '.join(DEBIAN[m] for m in missing)})")


def row(host: Host, measured: dict[str, Any] | None = None) -> Row:
    """`measured`: data.measured(), the committed measurements the note quotes (none quoted without them)."""
    f, m = host.facts, measured or {}
    check, needed = "memory allocator (CPU cells)", f"what the expected results used ({_where(host)})"
    if f.get("mode") == "container":
        return Row(check, "the image installs tcmalloc and jemalloc", needed, PASS)
    if "allocators" not in f:
        return Row(check, "not recorded", needed, NOTE, note=f"{OLD_RECORDING} its allocators: not compared")
    got, want = configdiff.allocators(f), configdiff.allocators(f.get("expected_run") or {})
    if not got or not want:
        return Row(check, "not read", needed, NOTE, note="the allocators could not be compared (HARNESS_ALLOCATOR, "
                                                         f"or {_where(host)}/env.json unreadable)")
    found = "; ".join(f"{label}: {got[(fw, kind)]}" for fw, kind, label in KINDS)
    needed = "the expected results': " + "; ".join(f"{label}: {want.get((fw, kind), '?')}"
                                                   for fw, kind, label in KINDS)
    differ = configdiff.allocator_changes(got, want)
    if not differ:
        return Row(check, found, needed, PASS)
    have = f["allocators"].get("available") or {}
    missing = sorted({w for *_, w in differ if w in allocator.LIBRARIES and not have.get(w)})
    what = "; ".join(f"{label} get {g}, not {w}" for _, _, label, g, w in differ)
    g_pt, w_pt = got[("pytorch", "model")], want[("pytorch", "model")]
    runs = configdiff.runs_effect(g_pt, w_pt, data=m.get("runs") or {})
    quoted = f"{runs['where']}: {runs['c1']}; {runs['figure5']}" if runs else ""
    size = "; ".join(filter(None, (configdiff.effect(g_pt, w_pt, measured=m.get("throughput") or {}), quoted)))
    fix = (f"{install_line(missing, f.get('package_tools') or {}, f.get('env', {}).get('CONDA_PREFIX'))}, or run in "
           "the image (--container)" if missing else "unset HARNESS_ALLOCATOR")
    return Row(check, found, needed, NOTE,
               note=f"this host's run will differ from the expected results: {what}"
                    + (f" ({size})" if size else "") + f"; the report says so. To match them: {fix}")


def fix_line(host: Host, measured: dict[str, Any] | None = None) -> str:
    """One line for reproduce.sh to print before a native run whose allocators differ ("" when they match)."""
    r = row(host, measured)
    return r.note if r.verdict == NOTE and "will differ" in r.note else ""


def tuning_row(host: Host) -> Row:
    """Transparent huge pages and the CPU governor: what this host has; the expected results' runs did not record
    them, so a difference cannot be named, only the values shown (a run records them: the report compares)."""
    t = host.facts.get("tuning")
    needed = "recorded with each run (env.json host_tuning)"
    if t is None:
        return Row("host tuning", "not recorded", needed, NOTE, note=f"{OLD_RECORDING} these settings: not known")
    found = "; ".join(f"{k.replace('_', ' ')}: {v or 'not readable'}" for k, v in t.items())
    return Row("host tuning", found, needed, NOTE,
               note="the committed runs behind the expected results predate this record; nothing in the harness "
                    "sets or needs these, and their effect was not measured here")


def cpu_row(host: Host, measured: dict[str, Any] | None = None) -> Row:
    """This host's CPU against the expected run's: another CPU moves every ratio on its own (measured: the CPU
    difference quoted from docs/runs/allocator, harness.host.configdiff)."""
    here = host.facts.get("cpu") or {}
    want = (host.facts.get("expected_run") or {}).get("cpu") or {}
    model, cores = here.get("model"), here.get("cores")
    needed = f"the expected results': {want.get('model', '?')}, {want.get('cores', '?')} cores"
    found = f"{model}, {cores} cores"
    if model == want.get("model") and cores == want.get("cores"):
        return Row("CPU", found, needed, PASS)
    size = configdiff.runs_cpu_effect(model or "", want.get("model", ""), data=(measured or {}).get("runs") or {})
    return Row("CPU", found, needed, NOTE,
               note="this host's ratios are not the expected results' to the digit: each framework's CPU kernels "
                    "dispatch by instruction set and cache sizes, and the intervals hold for one host"
                    + (f" ({size})" if size else "") + "; compare verdicts, and the report names the difference")


if __name__ == "__main__":  # reproduce.sh, before a native cpu run: the line, when this host differs
    from harness.preflight import data
    from harness.preflight.host import allocator_host

    line = fix_line(allocator_host(dict(os.environ)), data.measured())
    if line:
        print(f"reproduce.sh: note: {line}")
