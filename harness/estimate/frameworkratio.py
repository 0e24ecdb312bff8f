"""MindSpore's training step over PyTorch's, as the committed CPU runs measured it: what the estimate prices
MindSpore's accelerator cells by where no accelerator run measured MindSpore (harness.estimate.runtime,
harness.estimate.stepmodel).

From every committed reference CPU run (docs/runs/cpu-<profile>: one CPU's, harness.paths.is_reference) that ran
both frameworks on the same cells: for each MindSpore cell,
its steady seconds per training sample (the epochs after the first: harness.estimate.stepmodel.Donor.per_sample_s) over
PyTorch eager's in the same run at the same precision and devices (MindSpore's O2 and O3 against PyTorch's O2). A
planned MindSpore cell takes the median of the ratios of its own model, mode and AMP level, else of its model and
mode, else of its model; the range takes every cell of a model at the smallest and at the largest of its model's
ratios. Only the training steps are scaled; its start, compilation and evaluation stay at PyTorch's times.
 A weak proxy: on a CPU a step is the framework's host code and its CPU kernels, on a GPU or an NPU its device kernels,
how it launches them and how much of the step the host holds; the ratios say which way and how far apart the
frameworks were on the CPU, not what they will be on a device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from harness.devices import catalog

PRICED = "mindspore"     # the framework priced from its ratio
AGAINST = ("pytorch", "eager")   # ... to this framework and mode


@dataclass(frozen=True)
class Ratio:
    model: str
    mode: str
    amp: str
    ratio: float
    run: str     # the run folder it was measured in
    cell: str    # the MindSpore cell


@dataclass
class Ratios:
    found: list[Ratio] = field(default_factory=list)

    def _of(self, model: str | None, mode: str | None = None, amp: str | None = None) -> list[float]:
        return [r.ratio for r in self.found if r.model == model and mode in (None, r.mode) and amp in (None, r.amp)]

    def central(self, model: str | None, mode: str, amp: str) -> float | None:
        for got in (self._of(model, mode, amp), self._of(model, mode), self._of(model)):
            if got:
                return median(got)
        return None

    def overall(self, model: str | None) -> float | None:
        """The median of every ratio of the model."""
        got = self._of(model)
        return median(got) if got else None

    def spread(self, model: str | None) -> tuple[float, float] | None:
        got = self._of(model)
        return (min(got), max(got)) if got else None

    def models(self) -> list[str]:
        return sorted({r.model for r in self.found})

    def runs(self) -> list[str]:
        return sorted({r.run for r in self.found})


def measured(pools: Mapping[Path, Mapping[str, object]]) -> Ratios:
    """The ratios of the CPU runs' donor pools (run folder -> harness.estimate.stepmodel.donors of it)."""
    out = Ratios()
    for run, pool in sorted(pools.items()):
        ok = [d for d in pool.values() if d.ok and d.kind in ("model", "scaling") and d.per_sample_s > 0]
        base = {(d.model, d.kind, d.devices, catalog.precision(d.amp)): d for d in ok
                if (d.framework, d.mode) == AGAINST}
        for d in ok:
            twin = base.get((d.model, d.kind, d.devices, catalog.precision(d.amp)))
            if d.framework == PRICED and twin is not None:
                out.found.append(Ratio(d.model, d.mode, d.amp, d.per_sample_s / twin.per_sample_s, run.name, d.cell))
    return out
