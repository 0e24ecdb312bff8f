"""A cell set up in this process the way its child process sets it up, for the code that measures or inspects a
workload outside the runner: the benchmarks, `harness models` (describe.py) and the tests' probes.

    set_up(cell, data_folder)   cell -> CellContext (CPU, repeat 0, one rank) -> the back-end's setup() -> the data
                                (synthetic, or loaded from data_folder) -> the model file's workload
 `until` stops earlier: "backend" for a cell without a dataset (inference) or a caller that runs the training scenario
itself (which loads and builds), "data" for a caller that builds its own workloads or a reference loop on the data.
The child (harness/launch/child.py) takes the same steps with the launcher's ranks and the event log between them; its
scenario loads and builds through the same functions (harness.data.for_context, the model file's build).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness import data as datasets
from harness.config.cell import Cell
from harness.config.context import CellContext
from harness.contracts import Backend
from harness.frameworks import backend as load_backend
from harness.models import model_module

UNTIL = ("backend", "data", "workload")


@dataclass
class InProcess:
    ctx: CellContext       # its settings: what the back-end's setup() applied
    backend: Backend
    data: dict | None = None
    workload: Any = None   # a contracts.ProbedWorkload

    def build(self) -> Any:
        """A fresh workload on this set-up's data (the model file's build(ctx, data))."""
        return model_module(self.ctx.cell.model, self.ctx.cell.framework).build(self.ctx, self.data)


def set_up(cell: Cell, data_folder: str | None = None, *, until: str = "workload",
           accumulation_steps: int = 1) -> InProcess:
    """The cell set up in this process, up to `until` (see the module's docstring); synthetic data where data_folder
    (a verified dataset folder) is None; its training step in `accumulation_steps` micro-batches (CellContext)."""
    if until not in UNTIL:
        raise ValueError(f"until must be one of {UNTIL}, not {until!r}")
    ctx = CellContext(cell=cell, platform="cpu", repeat=0, data_folder=data_folder, synthetic=data_folder is None,
                      accumulation_steps=accumulation_steps)
    backend = load_backend(cell.framework)
    ctx.settings = backend.setup(ctx)
    out = InProcess(ctx, backend)
    if until != "backend":
        out.data = datasets.for_context(ctx)
        if until == "workload":
            out.workload = out.build()
    return out
