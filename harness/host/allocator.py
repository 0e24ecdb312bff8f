"""The host-side memory allocator each cell's process gets, as environment variables (part of the back-end's
`process_env`, so the runner, the report's settings table and every result record it).

Why: glibc's malloc raises its mmap threshold dynamically only up to 32 MiB (64-bit), so larger buffers are
mapped and unmapped on every allocation, page faults each time. PyTorch on CPU allocates activations through
malloc: ResNet50 at batch 32 has 32 MiB activations, and the same cell ran anywhere between ~14 and ~21
images/s from one process to the next depending on the threshold's history in that process. PyTorch's CPU
performance tuning guide recommends jemalloc or tcmalloc for this; MindSpore's runtime has its own memory pool.
The choice per framework is measured (benchmarks/process_gap.py, docs/methodology/allocator.md), not assumed.

    HARNESS_ALLOCATOR=auto (default) | system | jemalloc | tcmalloc | glibc-tuned

auto: the framework's preference list below, first one this host has (a preloadable library found on the
loader's standard paths; the images install Debian's libjemalloc2 and libtcmalloc-minimal4); glibc-tuned
(malloc's own tunables, no library needed) is always available. system: the process's allocator unchanged.
"""

from __future__ import annotations

import os
import platform as _platform
from pathlib import Path

# PyTorch: tcmalloc (PyTorch's own launcher, torch.backends.xeon.run_cpu, prefers it too), else glibc's tunables;
# jemalloc only by name: it ran ResNet50 at 0.77-0.82 of the plain loop even with the launcher's MALLOC_CONF.
# MindSpore: left alone (its runtime pools memory; slower with tcmalloc). Measured, process level:
# docs/methodology/allocator.md (benchmarks/process_gap.py).
PREFERENCE: dict[str, tuple[str, ...]] = {
    "pytorch": ("tcmalloc", "glibc-tuned"),
    "mindspore": ("system",),
}
# Operator cells on a CPU host: MindSpore gets tcmalloc too, the allocator PyTorch's cells have. Under glibc its
# processes differ by where their buffers land, not by anything in the operator: the same oneDNN primitive
# (Conv2d backward_data, gemm:jit, batch 16, 16->64) took 4.8 ms a call in some fresh processes and 7.2-9.1 ms in
# others, each steady inside; with the layout fixed (PYTHONHASHSEED set, address randomisation off) the processes
# agreed. Under tcmalloc they agree too (benchmarks/operator_layout.py, 3 processes of each of MindSpore's 24
# quick-profile operator cells: a CV of 0.1-4.0% against glibc's 0.2-7.1%, 0.2-11.0% in a first pass). The cost:
# Conv2d fwd+bwd 16->64 runs at glibc's slow layout's time (13-26% behind its fast one); 12 cells ran >2% faster.
# Measured: docs/methodology/operators.md, item 11. The models keep MindSpore's glibc (above).
OPERATOR_CPU_PREFERENCE: dict[str, tuple[str, ...]] = {
    "mindspore": ("tcmalloc", "jemalloc", "system"),
}
# jemalloc's defaults return any allocation over 8 MiB (oversize_threshold) to the kernel when freed (measured:
# ResNet50 at batch 16 ran at 0.74 of the plain loop). PyTorch's launcher sets this configuration whenever it
# preloads jemalloc, and so does HARNESS_ALLOCATOR=jemalloc; a MALLOC_CONF of the user's wins.
JEMALLOC_CONF = "oversize_threshold:1,background_thread:true,metadata_thp:auto"
LIBRARIES = {"jemalloc": ("libjemalloc.so.2",), "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")}
# Where Debian, Ubuntu, RHEL-likes and /usr/local put shared libraries (multiarch first).
SEARCH = (f"/usr/lib/{_platform.machine()}-linux-gnu", f"/lib/{_platform.machine()}-linux-gnu", "/usr/lib64",
          "/usr/lib", "/usr/local/lib")
# glibc's tunables (mallopt's environment names): a fixed threshold at 64 GiB keeps every buffer on the heap, and
# the trim threshold keeps freed memory for the next step instead of returning it to the kernel.
GLIBC_TUNED = {"MALLOC_MMAP_THRESHOLD_": str(64 << 30), "MALLOC_TRIM_THRESHOLD_": str(64 << 30)}
CHOICES = ("auto", "system", "jemalloc", "tcmalloc", "glibc-tuned")


def find_library(name: str) -> str | None:
    """The path of the first preloadable library of `name` (jemalloc, tcmalloc) on this host, or None."""
    conda = os.environ.get("CONDA_PREFIX")   # a conda environment's own lib folder (conda-forge's gperftools)
    for lib in LIBRARIES[name]:
        for folder in (*SEARCH, *([f"{conda}/lib"] if conda else [])):
            path = Path(folder) / lib
            if path.is_file():
                return str(path)
    return None


def preference(framework: str, platform: str = "cpu", kind: str = "model") -> tuple[str, ...]:
    """The allocators `auto` tries, in order, for a `kind` cell of `framework` on `platform`."""
    if platform == "cpu" and kind == "operator" and framework in OPERATOR_CPU_PREFERENCE:
        return OPERATOR_CPU_PREFERENCE[framework]
    return PREFERENCE.get(framework, ("system",))


def choose(framework: str, requested: str | None = None, *, platform: str = "cpu",
           kind: str = "model") -> tuple[str, dict[str, str]]:
    """(allocator name, environment variables) for a `kind` cell of `framework` on `platform`, on this host."""
    from harness.errors import HarnessError

    requested = requested or os.environ.get("HARNESS_ALLOCATOR") or "auto"
    if requested not in CHOICES:
        raise HarnessError(f"HARNESS_ALLOCATOR={requested} is not an allocator; choose one of {', '.join(CHOICES)}")
    names = preference(framework, platform, kind) if requested == "auto" else (requested,)
    for name in names:
        if name == "system":
            return name, {}
        if name == "glibc-tuned":
            return name, dict(GLIBC_TUNED)
        path = find_library(name)
        if path:
            preload = " ".join(filter(None, [path, os.environ.get("LD_PRELOAD")]))
            if name == "jemalloc":
                return name, {"LD_PRELOAD": preload, "MALLOC_CONF": os.environ.get("MALLOC_CONF") or JEMALLOC_CONF}
            return name, {"LD_PRELOAD": preload}
        if requested != "auto":
            raise HarnessError(f"HARNESS_ALLOCATOR={name}: no {' or '.join(LIBRARIES[name])} on this host; install "
                               f"it (Debian: {'libjemalloc2' if name == 'jemalloc' else 'libtcmalloc-minimal4'}) "
                               "or choose another")
    return "system", {}


def process_env(framework: str, platform: str = "cpu", kind: str = "model") -> dict[str, str]:
    """The variables to add to a cell's process: the allocator's, and HARNESS_ALLOCATOR_USED naming it (the
    results and the report's settings table show it)."""
    name, env = choose(framework, platform=platform, kind=kind)
    return {**env, "HARNESS_ALLOCATOR_USED": name}


def available() -> dict[str, str | None]:
    """For env.json: each preloadable allocator's path on this host (None where absent)."""
    return {name: find_library(name) for name in LIBRARIES}
