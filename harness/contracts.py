"""The plug-in contracts, declared once. A framework back-end (`harness/frameworks/<fw>.py`), a scenario
(`harness/scenarios/<name>.py`), a model package (`harness/models/<model>/__init__.py`, which declares what it
provides for the passes scenario) and its model files (`harness/models/<model>/<fw>.py`, whose `build` returns a
Workload), an operator file (`harness/scenarios/operator/<fw>.py`), a passes file (`harness/scenarios/passes/<fw>.py`),
an inference file (`harness/scenarios/inference/<fw>.py`) and a dataset (`harness/data/<name>.py`) each provide exactly
what these Protocols name, with these parameter names. harness.conformance checks the models and datasets a
matrix names before `harness run` or `harness list` does anything (one line naming the file and the missing part), and
tests/test_contracts.py checks every module, so adding a framework, model, dataset or scenario is guided by a failing
check.

What a plug-in may provide beyond its contract is a Protocol of its own here (PartialEpochWorkload,
SelfPreparingDataset), checked by the same test; the code that uses it asks with isinstance, never with hasattr
(tests/test_contracts.py fails on a hasattr in the harness other than on the standard library's os and tarfile).
Nor does it ask for a model by name: what differs between models is what the model declares (PassesModel,
NoPassesModel, PassesModelModule), and the same test fails on a model's name anywhere in
harness/scenarios.

Modules satisfy a Protocol through their functions: `Backend` is what `harness.frameworks.backend(name)` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from harness.config.cell import Cell
    from harness.config.context import CellContext
    from harness.results.eventlog import EventLog


@runtime_checkable
class Backend(Protocol):
    """A framework back-end. Called in the parent (no framework import there): process_env, launch_argv.
    Called in the child: the rest."""

    def process_env(self, platform: str, kind: str = "model") -> dict[str, str]:
        """Environment variables the child of a cell of this kind (harness.config.cell.Cell.kind) starts with (must not
        import the framework)."""

    def launch_argv(self, n: int, spec_path: str, port: int, log_dir: str, multi_node: dict[str, str]) -> list[str]:
        """The framework's own launcher starting n processes of `python -m harness.launch.child spec_path` on this host;
        `multi_node` (harness.launch.process.Nodes.launcher_options; empty on one host): nnodes, node_rank,
        master_addr."""

    def rank_from_env(self) -> tuple[int, int, int]:
        """(rank, local rank, world size) as the launcher set them; (0, 0, 1) for one process."""

    def setup(self, ctx: CellContext) -> dict[str, Any]:
        """Mode, device, seed, threads; returns the settings applied (they go into the result)."""

    def set_threads(self, ctx: CellContext, n: int) -> dict[str, Any]:
        """The framework's CPU kernels on n threads (called after setup, before anything is built); returns the
        settings applied (they go into the result)."""

    def all_gather_object(self, ctx: CellContext, obj: Any) -> list[Any]:
        """Every rank's `obj` (picklable), in rank order, over the cell's own collective (called by every rank of a
        launched cell once its measurements are written)."""

    PROFILED_MODES: tuple[str, ...]   # the modes the profiled pass (harness.profiling) takes apart

    def profile_ops(self, ctx: CellContext, run: Any, folder: str,
                    window: dict[str, Any] | None = None) -> dict[str, tuple[float, int]]:
        """run() under the framework's own profiler: op name -> (self time in seconds, calls), an op called inside
        one that has a category of its own (harness/profiling/categories.toml's scopes) counted there; the profiler's
        output kept in folder. `window` (on a device): the back-end records only a few steps of run() and fills the
        dict with what the profiling scenario reads of them (harness.profiling: the steps, their wall time, the
        device timeline)."""

    def synchronize(self, ctx: CellContext) -> None:
        """Wait for all queued device work (called before a clock is read)."""

    def versions(self) -> dict[str, Any]:
        """Versions of the framework and its device stack."""

    def peak_memory_mb(self, ctx: CellContext) -> float | None:
        """The framework's own peak device memory, None where it cannot say."""

    def reserved_memory_mb(self, ctx: CellContext) -> float | None:
        """The peak its caching allocator held from the device (allocated and cached, not yet given back: what the
        device must have), None where it cannot say."""

    def parameter_count(self, net: Any) -> int:
        """Trainable parameters of a network (a workload's fp32 `net`)."""

    def layer_count(self, net: Any) -> int:
        """Layers with parameters of a network."""


@runtime_checkable
class Scenario(Protocol):
    """How a kind of cell is measured: `run` in the child; `summarise` in the parent rebuilds the measurements
    from the event log (also of a cell that died half-way), {} where the child's result holds them all."""

    def run(self, ctx: CellContext, backend: Backend, events: EventLog) -> dict[str, Any]:
        """Measure the cell; returns keys for its result."""

    def summarise(self, events: list[dict[str, Any]], cell: Cell) -> dict[str, Any]:
        """Measurements from an event log."""


@runtime_checkable
class Workload(Protocol):
    """What a model file builds with `build(ctx, data)`."""

    samples_per_epoch: int
    # The network with its fp32 weights, also under AMP: a MindSpore workload keeps the copy it casts for AMP in
    # another attribute; PyTorch's autocast leaves the network fp32 (apex O2, on Ascend only, casts it in place).
    # `harness models` counts its parameters and layers through the back-end; the passes scenario times it.
    net: Any

    def train_epoch(self) -> float:
        """One epoch; returns the mean loss as a Python float (which waits for the device)."""

    def evaluate(self, split: str) -> float:
        """The model's metric on 'val' or 'test'."""

    def state_arrays(self) -> list:
        """The trained parameters as numpy arrays (compared across data-parallel ranks)."""


@runtime_checkable
class PartialEpochWorkload(Workload, Protocol):
    """A workload that can also train an epoch in parts, for a profile that evaluates several times an epoch
    (`evals_per_epoch` in harness/config/matrix.toml: the target profile's GRU)."""

    def train_part(self, part: int, parts: int) -> tuple[float, int]:
        """Part `part` of `parts` (0-based) of the current epoch's batches, in the epoch's order; the mean loss
        (a Python float, which waits for the device) and the samples trained. The last part ends the epoch."""


@runtime_checkable
class ProbedWorkload(Workload, Protocol):
    """For the tests only (tests/probe_model.py, tests/test_equivalence.py): one forward pass, one optimiser
    step and one loss on fixed probe batches, in fp32, so that both frameworks can be compared."""

    def probe_forward(self) -> Any:
        """The network's output on the probe batch, as a numpy array."""

    def probe_step(self) -> float:
        """One optimiser step on the probe batch; the loss before it."""

    def probe_loss(self) -> float:
        """The loss on the probe batch, without a step."""


@runtime_checkable
class ModelPackage(Protocol):
    """`harness/models/<model>/__init__.py`: the framework-neutral parts (numpy initial weights, shapes; it imports no
    framework), what the model declares for the passes (PassesModel or NoPassesModel), and how it trains in the words
    of MLPerf's event log. The folder also holds `pytorch.py` and `mindspore.py` (ModelModule), `logcheck.yaml` (the
    rules MLPerf's compliance checker applies to its event logs, enqueued by harness/logcheck/common.yaml) and
    `reference_pytorch.py` and `reference_mindspore.py` (ReferenceModule); harness.conformance checks all of it
    before a run."""

    # Event-log keys and their values (MLPerf's key names, mlperf_logging's constants) that say how the model trains,
    # logged once its workload is built (harness.results.mlperf.log_workload): opt_name and
    # opt_learning_rate_decay_schedule
    # at least. Its hyperparameters' keys come from the matrix (harness.results.mlperf.HPARAM_KEYS).
    MLPERF_KEYS: dict[str, Any]


@runtime_checkable
class ReferenceLoop(Protocol):
    """What ReferenceModule.build returns."""

    samples_per_epoch: int

    def train_epoch(self, epoch: int) -> float:
        """One epoch on the same batches as the harness workload's epoch `epoch`; the mean loss as a Python float
        (which waits for the device)."""


@runtime_checkable
class ReferenceModule(Protocol):
    """`harness/models/<model>/reference_<framework>.py`: the model written the way its framework's own documentation
    and model zoo write it, so that benchmarks/reference_gap.py and benchmarks/process_gap.py can tell how close the
    harness's cell runs to the framework's recommended loop (tests/test_reference.py checks that the two train alike).
    It shares with the harness, on purpose, only what makes the comparison fair and is framework-neutral numpy: the
    initial weights, the data and its batches in order (harness.models.<name> packages) and the hyperparameters. From
    the harness it imports nothing else (harness.conformance checks): the network, the loss, the optimiser and
    the loop are written again in the framework's idiom (MindSpore: nn.Cell networks, a loss Cell, nn.TrainOneStepCell,
    ms.amp.build_train_network for AMP; PyTorch: nn.Module networks, zero_grad(set_to_none=True), forward,
    loss.backward(), optimizer.step(), torch.autocast for AMP)."""

    def build(self, data: dict, hp: dict, spec: Any, seed: int, amp: str, device: str = "cpu") -> ReferenceLoop:
        """data: the dataset module's load()/synthetic() dict; hp: the cell's hyperparameters (read-only); spec: the
        cell's harness.config.spec.ModelSpec; amp: "off" or the cell's AMP level; device: where PyTorch's loop trains
        ("cpu", "cuda:0", "npu:0": on an accelerator its documented GPU way, pinned memory and a prefetching
        DataLoader); MindSpore's takes its device from the context the caller set (mode, device, threads) and
        ignores it."""


@runtime_checkable
class ModelModule(Protocol):
    """`harness/models/<model>/<framework>.py`."""

    def build(self, ctx: CellContext, data: dict) -> ProbedWorkload:
        """The workload, built from the shared numpy weights and the data."""


@runtime_checkable
class PassesModel(Protocol):
    """`harness/models/<model>/__init__.py` of a model the passes scenario times (S4: forward and gradient at a
    fixed batch)."""

    def pass_batch(self, workload: Workload, data: dict, batch: int) -> tuple[np.ndarray, ...]:
        """The first `batch` training samples, unshuffled, the same numpy arrays for every framework (made from the
        model's own workload and data): the inputs first, the target last; integer arrays are ids or labels."""


@runtime_checkable
class NoPassesModel(Protocol):
    """`harness/models/<model>/__init__.py` of a model that has no fixed batch to time (GCN trains full-batch on one
    graph). The passes scenario raises NO_PASSES as harness.errors.Unsupported, before it builds anything."""

    NO_PASSES: str


@runtime_checkable
class AccumulatingModel(Protocol):
    """`harness/models/<model>/__init__.py` of a model whose training step can take its batch as several micro-batches
    (gradient accumulation, harness.devices.memory.plan: where the device cannot hold the whole batch). Its model files
    train with `ctx.accumulation_steps` micro-batches a step: every micro-batch's forward and backward, one optimiser
    step, one step of the learning-rate schedule."""

    def micro_batches(self, batch: tuple, parts: int) -> list[tuple[tuple, Any]]:
        """The batch (the arrays a training step takes: numpy, torch or MindSpore, all sliced alike) as `parts`
        micro-batches of equal size, each with its share: the factor its mean loss is multiplied by so that the
        shares' losses add up to the whole batch's mean loss (1 / parts where the loss is a mean over samples), and
        their gradients to the whole batch's. `parts` 1: the batch itself, share 1."""


@runtime_checkable
class NoAccumulationModel(Protocol):
    """`harness/models/<model>/__init__.py` of a model that does not accumulate gradients: NO_ACCUMULATION says why
    (a cell of it that the device cannot hold is skipped with that reason)."""

    NO_ACCUMULATION: str


@runtime_checkable
class PassesModelModule(ModelModule, Protocol):
    """`harness/models/<model>/<framework>.py` of a PassesModel."""

    def pass_loss(self, net: Any) -> Callable[..., Any]:
        """The gradient pass's loss on `net`: called with the batch's tensors in pass_batch's order, it returns the
        mean loss the model trains with, in fp32. MindSpore: an nn.Cell (value_and_grad differentiates it)."""


@runtime_checkable
class PassesModule(Protocol):
    """`harness/scenarios/passes/<framework>.py`."""

    def build(self, ctx: CellContext, model: PassesModelModule, workload: Workload, arrays: tuple
              ) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], None]]:
        """(forward, gradient, sync) on the workload's fp32 `net` and the batch `arrays` (PassesModel.pass_batch):
        one eval-mode forward pass without gradients; one train-mode forward and backward of `model.pass_loss`
        that computes the parameters' gradients without updating them; waiting for either."""


@runtime_checkable
class InferenceModule(Protocol):
    """`harness/scenarios/inference/<framework>.py`, for a net of harness.scenarios.inference.nets.NETS."""

    def network(self, name: str, weights: dict) -> Any:
        """The fp32 network in eval mode, from the shared numpy weights."""

    def build(self, ctx: CellContext, name: str, batch: int, weights: dict, images: np.ndarray
              ) -> tuple[Callable[[], Any], Callable[[], None], Any]:
        """(run, sync, net): one eval-mode forward pass of `images` without gradients at the cell's AMP level, waiting
        for it, and the fp32 network (the back-end's parameter_count / layer_count measure it)."""

    def forward(self, ctx: CellContext, name: str, weights: dict, images: np.ndarray) -> np.ndarray:
        """fp32 eval-mode logits as numpy (the tests compare the two frameworks')."""


@runtime_checkable
class OperatorModule(Protocol):
    """`harness/scenarios/operator/<framework>.py`."""

    def build(self, op: str, shape: dict, dtype: str, direction: str, ctx: CellContext,
              arrays: dict) -> tuple[Callable[[], Any], Callable[[], None]]:
        """(run, sync): one iteration, and waiting for it."""


@runtime_checkable
class DatasetModule(Protocol):
    """`harness/data/<name>.py` (harness.data.module(name)); further parameters of load and synthetic have
    defaults."""

    FOLDER: str             # the folder name under a data dir (laid out like ../shared/data)
    FILES: dict[str, str]   # {file name: pinned sha256}
    URLS: dict[str, str]    # {file name: download URL}
    # Whether a profile's val_samples / eval_samples (harness/config/matrix.toml) cuts what a model's evaluate("val")
    # reads from this dataset (False for a fixed split that the models always read whole, as Cora's 500 validation
    # nodes).
    EVAL_LIMITED: bool

    def val_split_size(self, data: dict) -> int:
        """How many samples the split that a model's evaluate("val") reads holds (a dataset without a validation
        split evaluates on its test split), before any profile's limit: the event log's eval_samples."""

    def load(self, folder: Path) -> dict:
        """The real data, as numpy arrays, from the verified folder."""

    def synthetic(self, seed: int) -> dict:
        """A learnable stand-in of the same shapes, made from the seed."""


@runtime_checkable
class SelfPreparingDataset(DatasetModule, Protocol):
    """A dataset that accepts several layouts of its files and verifies them itself (harness.data.prepare calls
    it instead of checking FILES one by one)."""

    def prepare(self, folder: Path, allow_download: bool) -> Path:
        """The verified folder to load from, downloading what is missing where allowed."""
