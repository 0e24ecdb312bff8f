"""Numbers that come from runs are rendered into the docs, never typed: `python -m harness docs [--check | --write]`.
 A doc file holds marked blocks, each marker on its own line:

    <!-- rendered:NAME -->
    ... (written by `python -m harness docs --write`; edits by hand are overwritten, and --check reports them)
    <!-- /rendered:NAME -->

BLOCKS declares every block: its file, its NAME, the committed run folders it reads (docs/runs/<run>/, published
with tools/publish_run.py) and the function that renders its Markdown from them (harness.docs.render: results,
run.json and env.json only, never a file of the host that renders).

    render(repo)   -> {path: new text} of every file that holds declared blocks
    check(repo)    -> the stale blocks, "FILE: NAME" each ([] when the docs are current)
    write(repo)    -> the stale blocks, after rewriting them in place
    missing_runs(repo, block) -> the block's run folders that are not committed (yet)
    load_runs(repo, blocks) -> {run folder name: docs_render.Run}; content(block, runs) -> its Markdown
Each takes `blocks=` (default BLOCKS) to work on some of them. A block whose markers are missing from its file, or
whose run folder is missing, is a HarnessError: one line naming the file, the block and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.docs import accelerator as docs_accelerator
from harness.docs import estimate as docs_estimate
from harness.docs import facts as docs_facts
from harness.docs import gpu as docs_gpu
from harness.docs import memory as docs_memory
from harness.docs import render as docs_render
from harness.docs import start as docs_start
from harness.docs.render import Run
from harness.errors import HarnessError
from harness.host import allocator_effect
from harness.results.store import write_atomic

RUNS_DIR = "docs/runs"
QUICK, TARGET = "cpu-quick", "cpu-target"   # ./reproduce.sh cpu --synthetic cifar10; ./reproduce.sh cpu --target
QUICK_INTEL = "cpu-quick-intel-xeon"        # the same quick run on an Intel Xeon: the expected results there
GPU = ("cuda-gpuprobe", "cuda-gpuprobe-compile", "cuda-quick")   # the H200's runs (docs/runs/README.md)
FIX = "python -m harness docs --write"
ALL = (QUICK, TARGET, QUICK_INTEL, *GPU)   # every committed run: what ran where
MEMORY = "docs/methodology/device-memory.md"
ALLOCATOR = tuple(f"allocator/{c}-{i}" for c in ("tcmalloc", "no-tcmalloc") for i in (1, 2, 3))   # one Intel Xeon host


@dataclass(frozen=True)
class Block:
    file: str                               # relative to the repository root
    name: str
    runs: tuple[str, ...]                   # folders under docs/runs
    make: Callable[[Sequence[Run]], str]    # the Markdown between the markers

    @property
    def label(self) -> str:
        return f"{self.file}: {self.name}"


BLOCKS = (
    Block("ARTIFACT.md", "checklist-times", (QUICK, TARGET), docs_render.checklist_times),
    Block("ARTIFACT.md", "kick-the-tires", (QUICK,), docs_render.kick_the_tires),
    Block(f"{RUNS_DIR}/README.md", "workflow-times", (QUICK, TARGET), docs_render.workflow_times),
    Block("ARTIFACT.md", "expected-cpu", (QUICK, TARGET), docs_render.expected_summary),
    Block(f"{RUNS_DIR}/README.md", "expected-cpu-parts", (QUICK, TARGET), docs_render.expected_cpu),
    Block("README.md", "readme-times", (QUICK, TARGET), docs_render.readme_times),
    # README's test command as it last ran whole from a plain clone (docs/runs/fresh-host/test-command.json)
    Block("README.md", "test-command", (), docs_facts.test_command),
    # the CPU runs too: MindSpore's cells are priced from their ratio to PyTorch (harness.estimate.frameworkratio)
    Block("ARTIFACT.md", "accelerator-estimates", (*GPU, QUICK, TARGET, QUICK_INTEL),
          docs_accelerator.accelerator_estimates),
    Block("docs/platforms/cuda.md", "gpu-measured", GPU, docs_accelerator.gpu_measured),
    # What ran where, the profiles' defaults, the `done:` range, a GPU's expectations per claim (harness.docs.facts,
    # harness.docs.gpu): each fact from one source, rendered wherever a page states it.
    Block("README.md", "where-ran", ALL, docs_facts.where_ran_line),
    Block("README.md", "profiles", (QUICK,), docs_facts.profiles),
    Block("ARTIFACT.md", "where-ran", ALL, docs_facts.where_ran),
    Block("ARTIFACT.md", "profiles", (QUICK,), docs_facts.profiles),
    Block("ARTIFACT.md", "done-range", (QUICK,), docs_facts.done_range),
    Block("ARTIFACT.md", "expected-gpu", GPU, docs_gpu.expected_gpu),
    Block("docs/platforms/cpu.md", "where-ran", ALL, docs_facts.where_ran),
    Block("docs/platforms/cuda.md", "where-ran", ALL, docs_facts.where_ran),
    Block("docs/platforms/ascend.md", "where-ran", ALL, docs_facts.where_ran),
    Block("docs/platforms/verified.md", "where-ran", ALL, docs_facts.where_ran),
    Block("docs/methodology/why.md", "why-cpu-measured", (QUICK,), docs_render.why),
    Block("docs/methodology/why.md", "why-crosscheck", (QUICK,), docs_render.why_crosscheck),
    # From the committed predictions (harness/devices/devicememory.json) and the device table; the last beside the
    # H200's runs.
    Block(MEMORY, "memory-table", (), docs_memory.memory_table),
    Block(MEMORY, "memory-devices", GPU[:1], docs_memory.device_table),
    Block(MEMORY, "memory-fit-plan", (), docs_memory.fit_plan),
    Block(MEMORY, "memory-vs-device", GPU[:2], docs_memory.versus_device),
    Block("ARTIFACT.md", "memory-plan", (), docs_memory.plan_line),
    # The quick run beside the allocator runs of one host (harness.host.allocator_effect).
    Block("docs/methodology/allocator.md", "allocator-effect",
          (QUICK, *(f"allocator/{c}-{i}" for c in ("tcmalloc", "no-tcmalloc") for i in (1, 2, 3))),
          allocator_effect.table),
    # A start block per reviewer's host, and the verdicts per CPU family the committed quick runs reached
    # (harness.docs.start): the committed runs, host.toml, the preflight's lines and memory rule, the predictions.
    Block("ARTIFACT.md", "start-cpu", (QUICK, TARGET, QUICK_INTEL, *ALLOCATOR), docs_start.start_cpu),
    Block("ARTIFACT.md", "start-gpu", (QUICK, *GPU), docs_start.start_gpu),
    Block("ARTIFACT.md", "start-ascend", (QUICK, *GPU), docs_start.start_ascend),
    Block("ARTIFACT.md", "cpu-families", (QUICK, QUICK_INTEL, *ALLOCATOR), docs_start.cpu_families),
    Block("README.md", "host-memory", (QUICK,), docs_start.host_memory_line),
    Block("docs/methodology/estimate.md", "held-out", (QUICK, TARGET), docs_estimate.held_out),
)


def _markers(name: str) -> tuple[re.Pattern, re.Pattern]:
    return (re.compile(rf"^[ \t]*<!-- rendered:{re.escape(name)} -->[ \t]*\n", re.M),
            re.compile(rf"^[ \t]*<!-- /rendered:{re.escape(name)} -->[ \t]*$", re.M))


def span(text: str, block: Block) -> tuple[int, int] | None:
    """Where the block's content lies in `text` (between its marker lines), None where it has no markers; a
    HarnessError where they are broken (one without the other, twice, or in the wrong order)."""
    start, end = _markers(block.name)
    starts, ends = list(start.finditer(text)), list(end.finditer(text))
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1 or ends[0].start() < starts[0].end():
        raise HarnessError(f"{block.file}: the markers of block {block.name} are broken ({len(starts)} opening, "
                           f"{len(ends)} closing); keep one `<!-- rendered:{block.name} -->` line and one "
                           f"`<!-- /rendered:{block.name} -->` line after it")
    return starts[0].end(), ends[0].start()


def has_markers(repo: Path, block: Block) -> bool:
    path = Path(repo) / block.file
    return path.is_file() and span(path.read_text(), block) is not None


def missing_runs(repo: Path, block: Block) -> list[str]:
    return [f"{RUNS_DIR}/{r}" for r in block.runs if not (Path(repo) / RUNS_DIR / r / "run.json").is_file()]


def load_runs(repo: Path, blocks: Sequence[Block]) -> dict[str, Run]:
    runs = {}
    for block in blocks:
        missing = missing_runs(repo, block)
        if missing:
            raise HarnessError(f"{block.label}: the run folder {', '.join(missing)} is not committed; publish it with "
                               f"`python tools/publish_run.py RUN_FOLDER {missing[0]}`, then `{FIX}`")
        for name in block.runs:
            if name not in runs:
                runs[name] = Run.load(Path(repo) / RUNS_DIR / name)
    return runs


def content(block: Block, runs: dict[str, Run]) -> str:
    """The block's text between its marker lines."""
    return block.make([runs[r] for r in block.runs]).strip("\n") + "\n"


def render(repo: Path, blocks: Sequence[Block] = BLOCKS) -> dict[Path, str]:
    """Every file holding declared blocks, with its blocks rendered afresh."""
    repo = Path(repo)
    runs = load_runs(repo, blocks)
    texts: dict[Path, str] = {}
    for block in blocks:
        path = repo / block.file
        if path not in texts:
            if not path.is_file():
                raise HarnessError(f"{block.file} does not exist; it should hold the block {block.name}")
            texts[path] = path.read_text()
        where = span(texts[path], block)
        if where is None:
            raise HarnessError(f"{block.file} has no block {block.name}: add a line `<!-- rendered:{block.name} -->` "
                               f"and a line `<!-- /rendered:{block.name} -->` where it goes, then run `{FIX}`")
        a, b = where
        texts[path] = texts[path][:a] + content(block, runs) + texts[path][b:]
    return texts


def stale(repo: Path, blocks: Sequence[Block] = BLOCKS) -> tuple[list[Block], dict[Path, str]]:
    repo = Path(repo)
    new = render(repo, blocks)
    out = []
    for block in blocks:
        path = repo / block.file
        old = path.read_text()
        a, b = span(old, block)
        c, d = span(new[path], block)
        if old[a:b] != new[path][c:d]:
            out.append(block)
    return out, new


def check(repo: Path, blocks: Sequence[Block] = BLOCKS) -> list[str]:
    """The blocks whose text is not what their run folders render ("FILE: NAME" each)."""
    return [b.label for b in stale(repo, blocks)[0]]


def write(repo: Path, blocks: Sequence[Block] = BLOCKS) -> list[str]:
    """Rewrite the stale blocks in place (the rest of each file untouched); return them ("FILE: NAME" each)."""
    found, new = stale(repo, blocks)
    for path in dict.fromkeys(Path(repo) / b.file for b in found):
        write_atomic(path, new[path])
    return [b.label for b in found]
