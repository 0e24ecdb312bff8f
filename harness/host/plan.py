"""What a host can run: the one object asked, for every cell, what it does with it here (run it, run it with its batch
in micro-batches, or skip it), and why. The answer is decided once per cell (Host.decide, a CellDecision) and every
reader reads that one answer: the runner, the child it starts (through its spec), `harness list` and the estimate.
 A cell is recorded as `skipped`, with the reason, instead of running when (first match wins, in this order):
- a [[skip]] rule of the matrix names it on this platform in the run's profile (harness/config/matrix.toml); the rule
sees a
  multi-node cell's devices of one node: a host's limits are per host;
- this Python lacks a module its framework needs on the platform (harness.host.platforms.missing_framework: only absence
  counts, a framework that is installed but fails to import still runs, and fails, in its cell);
- it needs more devices on each host than the host shows (not on cpu, where a cell's processes share the CPU);
- its predicted peak device memory is more than 90% of the device's, even with its batch in micro-batches (gradient
  accumulation) or because its model does not accumulate (harness.devices.memory.plan: the committed CPU-side
  prediction against the memory NVML, nvidia-smi or npu-smi reports, read once; where it cannot be read, or with
  HARNESS_DEVICE_MEMORY=off, nothing is skipped for memory); or HARNESS_ACCUMULATION_STEPS asks for accumulation
  its model does not do.
A cell that runs takes its batch in the memory plan's micro-batches (1: all at once); where it takes more than one,
the decision says why (the override, or the device's memory), and the child records that reason as it was given.
 The runner asks before every cell, `harness list --platform` for every line it prints, and `--resume` keeps a skipped
result only while its reason is the one decided now: one decision is what keeps the three in agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.config.cell import Cell
from harness.config.matrix import Matrix
from harness.devices import accumulation
from harness.devices import memory as devicememory
from harness.devices import query as devicequery
from harness.host import platforms

RUN, ACCUMULATE, SKIP = "run", "accumulate", "skip"
MEMORY = "device memory"   # why a cell accumulates where no override asked for it


@dataclass(frozen=True)
class CellDecision:
    """What this host does with one cell, decided once (Host.decide)."""
    action: str                   # RUN, ACCUMULATE (its batch in plan.steps micro-batches) or SKIP
    reason: str | None            # SKIP: what its skipped result records; ACCUMULATE: why (the override or MEMORY)
    plan: devicememory.Plan       # the memory plan, made for every cell (`harness list` shows it for skipped ones too)
    by: str | None = None         # SKIP: the check that skipped it: "rule", "framework", "devices" or "memory"

    @property
    def skip(self) -> str | None:
        """The reason its skipped result records; None where it runs."""
        return self.reason if self.action == SKIP else None

    @property
    def planned(self) -> bool:
        """Whether the memory plan had the say: no rule, missing framework or device count skipped it first."""
        return self.by in (None, "memory")


@dataclass(frozen=True)
class Host:
    platform: str
    profile: str | None
    devices: int                  # the devices the platform shows (harness.host.platforms.visible_devices); 1 on cpu
    missing: Mapping[str, str]    # framework -> why this Python cannot run its cells on the platform
    matrix: Matrix = field(repr=False)   # whose [[skip]] rules apply
    memory_gib: float | None = None       # each device's memory (the smallest device's); None: not known
    memory_source: str = "not read"       # where memory_gib comes from, or why it is not known
    # Every cell's decision, made on first asking (a cell id names one cell of the host's matrix and profile).
    _decided: dict[str, CellDecision] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def probe(cls, matrix: Matrix, platform: str, profile: str | None, devices: int | None = None,
              memory: tuple[float | None, str] | None = None) -> Host:
        """This host as it is now: `devices` where the caller has counted them already (the runner, through
        platforms.require), else counted here; every framework's modules looked up, none imported; `memory` (GiB,
        source) where the caller names the device (`harness list --device`), else read from the host's own."""
        if devices is None:
            devices = platforms.visible_devices(platform)
        missing = {fw: why for fw in platforms.FRAMEWORK_MODULES
                   if (why := platforms.missing_framework(fw, platform)) is not None}
        if memory is None:
            memory = ((None, f"{devicememory.OFF} is set") if devicememory.switched_off()
                      else devicequery.host_memory(platform))
        gib, source = memory
        return cls(platform, profile, devices, missing, matrix, gib, source)

    def decide(self, cell: Cell) -> CellDecision:
        """What this host does with the cell, and why: decided on first asking, then the same answer every time."""
        if cell.id not in self._decided:
            self._decided[cell.id] = self._decide(cell)
        return self._decided[cell.id]

    def _decide(self, cell: Cell) -> CellDecision:
        # The memory plan first, for every cell: `harness list` shows it beside a skip of another kind, and a bad
        # HARNESS_ACCUMULATION_STEPS is refused whatever the cell.
        plan = devicememory.plan(cell, self.memory_gib if self.platform != "cpu" else None)
        for by, why in (("rule", self._rule(cell)), ("framework", self.missing.get(cell.framework)),
                        ("devices", self._too_few_devices(cell)), ("memory", plan.skip)):
            if why:
                return CellDecision(SKIP, why, plan, by)
        if plan.steps == 1:
            return CellDecision(RUN, None, plan)
        forced = accumulation.forced_steps()   # set: every accumulating cell's steps are its (devicememory.plan)
        return CellDecision(ACCUMULATE, MEMORY if forced is None else f"{accumulation.FORCE}={forced}", plan)

    def verdict(self, cell: Cell) -> str | None:
        """Why the cell cannot run on this host (the reason its skipped result records), or None where it can."""
        return self.decide(cell).skip

    def plan(self, cell: Cell) -> devicememory.Plan:
        """How the cell runs on this host's device: its batch in plan.steps micro-batches, or skipped for memory."""
        return self.decide(cell).plan

    def memory_line(self, cells: list[Cell]) -> str | None:
        """What the runner says of device memory, and of the cells that accumulate gradients, before the first cell
        (None on cpu unless HARNESS_ACCUMULATION_STEPS is set)."""
        decided = [(c, d) for c in cells if (d := self.decide(c)).planned]
        forced = accumulation.forced_steps()
        said = []
        if self.platform != "cpu" and self.memory_gib is None:
            said.append(f"device memory: not known ({self.memory_source}); no cell is skipped for memory")
        elif self.platform != "cpu":
            said.append(f"device memory: {self.memory_gib:.1f} GiB a device ({self.memory_source})")
        if forced is not None:
            said.append(f"{accumulation.FORCE}={forced}: every cell of a model that accumulates gradients takes its "
                        f"batch in {forced} micro-batches, whatever the memory")
        acc = sorted({f"{c.model} {devicememory.precision(c.amp)} ({d.plan.label})" for c, d in decided
                      if d.action == ACCUMULATE})
        if acc:
            said.append(f"{sum(d.action == ACCUMULATE for _, d in decided)} cells take their batch in micro-batches "
                        f"(gradient accumulation): {', '.join(acc)}")
        big = [c for c, d in decided if d.action == SKIP]
        models = f" ({', '.join(sorted({c.model or c.kind for c in big}))})" if big else ""
        if forced is not None:
            said.append(f"{len(big)} cells of models that do not accumulate are recorded as skipped{models}")
        elif self.platform != "cpu" and self.memory_gib is not None:
            said.append(f"{len(big)} cells predicted to need more than {devicememory.HEADROOM:.0%} of it"
                        + (", even in micro-batches," if acc else "") + f" are recorded as skipped{models}")
        return "; ".join(said) or None

    def _rule(self, cell: Cell) -> str | None:
        values: dict[str, Any] = {**cell.axes(), "devices": cell.devices_per_node, "platform": self.platform,
                                  "profile": self.profile}
        return self.matrix.skip_rule(values)

    def _too_few_devices(self, cell: Cell) -> str | None:
        if self.platform != "cpu" and cell.devices_per_node > self.devices:
            return f"needs {cell.devices_per_node} devices on each host, the host shows {self.devices}"
        return None
