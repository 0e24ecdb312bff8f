"""The PyTorch host pipeline (harness.models._pytorch.device_batches) and the accelerator settings beside it.

- Every PyTorch model's training batches are the same, in the same order, whether the pipeline runs ahead in a
  thread (the accelerator path) or one batch at a time (the CPU path): sha256 digests of every batch's arrays over
  an epoch. Both paths run here on CPU, the prefetching one forced by the workload's `prefetch` depth.
- The pipeline runs ahead: a slow step finds its next batch ready; it stops (no thread left) on an exception in the
  step or in the pipeline.
- The fused optimisers chosen on cuda compute the update the default implementation computes (the one the CPU
  equivalence tests compare with MindSpore's), and the choice is recorded in the cell's settings.
"""

import hashlib
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from harness.config import matrix
from harness.models._pytorch import device_batches, optimizer_options, prefetch_depth

# Every model with a host pipeline; GCN is full-batch, its graph on the device from the start.
MODELS = ("resnet50", "googlenet", "gru", "lstm", "bert")


def _workload(model: str):
    from harness.config.cell import Cell
    from harness.config.spec import model_spec
    from harness.launch.inprocess import set_up

    m = matrix.load()
    spec = model_spec(m.data["models"][model], "quick")
    spec = replace(spec, epochs=max(spec.epochs, 2))
    cell = Cell(id="prefetch", kind="model", model=model, framework="pytorch", mode="eager", amp="off", devices=1,
                repeats=1, timeout_s=0, seed=int(m.data["defaults"]["seed"]), spec=spec)
    return set_up(cell).workload


def _digests(workload, depth: int) -> list[str]:
    workload.prefetch = depth
    with workload.train_batches() as batches:
        return [hashlib.sha256(b"".join(t.cpu().numpy().tobytes() for t in batch)).hexdigest() for batch in batches]


@pytest.mark.parametrize("model", MODELS)
def test_prefetched_batches_are_the_synchronous_ones(model):
    w = _workload(model)
    assert w.prefetch == 0, "CPU keeps the synchronous path"
    sync = _digests(w, 0)
    assert len(sync) >= 1
    assert _digests(w, 2) == sync
    assert _digests(w, 1) == sync
    w.epoch += 1   # the next epoch's shuffle too
    assert _digests(w, 3) == _digests(w, 0)
    assert not [t for t in threading.enumerate() if t.name == "host-prefetch"]


def test_training_with_prefetch_gives_the_same_losses():
    losses = []
    for depth in (0, 2):
        w = _workload("gru")
        w.prefetch = depth
        losses.append([w.train_epoch() for _ in range(2)])
    assert losses[0] == losses[1]


CTX = SimpleNamespace(platform="cpu", hparams={}, settings={})


def _slow_batches(n: int, build_s: float, fail_at: int | None = None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"pipeline failed at batch {i}")
        time.sleep(build_s)
        yield (np.full(4, i, dtype=np.int64),)


def _feed(batches, depth=2):
    return device_batches(CTX, torch.device("cpu"), batches, lambda b: tuple(torch.from_numpy(a) for a in b),
                          lambda t, nb: t, depth)


def test_a_slow_step_never_waits_for_a_batch():
    build_s, step_s = 0.05, 0.2
    waits, seen = [], []
    with _feed(_slow_batches(8, build_s)) as batches:
        t = time.perf_counter()
        for (x,) in batches:
            waits.append(time.perf_counter() - t)
            seen.append(int(x[0]))
            time.sleep(step_s)   # the step, slower than building a batch
            t = time.perf_counter()
    assert seen == list(range(8))
    # The first batch is built while nobody waits for it; every later one was ready when the step before it ended.
    assert max(waits[1:]) < 0.02, waits


def test_the_pipeline_stops_on_an_exception_in_the_step():
    feed = _feed(_slow_batches(10_000, 0.001))
    with pytest.raises(RuntimeError, match="step failed"), feed as batches:
        for i, _ in enumerate(batches):
            if i == 2:
                raise RuntimeError("step failed")
    assert not feed.alive
    assert not [t for t in threading.enumerate() if t.name == "host-prefetch"]


def test_an_exception_in_the_pipeline_reaches_the_step():
    seen = []
    feed = _feed(_slow_batches(10, 0.0, fail_at=3))
    with pytest.raises(ValueError, match="batch 3"), feed as batches:
        seen.extend(int(x[0]) for (x,) in batches)
    assert seen == [0, 1, 2]
    assert not feed.alive


def test_cpu_keeps_the_synchronous_path_and_accelerators_prefetch():
    assert prefetch_depth(SimpleNamespace(platform="cpu", hparams={}, settings={})) == 0
    assert prefetch_depth(SimpleNamespace(platform="cuda", hparams={}, settings={})) > 0
    assert prefetch_depth(SimpleNamespace(platform="cuda", hparams={"prefetch": 0}, settings={})) == 0


def _ctx(platform):
    return SimpleNamespace(platform=platform, hparams={}, settings={})


def test_fused_optimisers_on_cuda_only():
    cuda, cpu = _ctx("cuda"), _ctx("cpu")
    assert optimizer_options(cuda, "SGD") == {"fused": True}
    assert cuda.settings["optimizer_impl"] == "torch.optim.SGD, fused=True"
    assert optimizer_options(cpu, "AdamW") == {}
    assert cpu.settings["optimizer_impl"] == "torch.optim.AdamW, default implementation"


# The models' optimisers, as they build them: ResNet50's and GoogLeNet's SGD with momentum and weight-decay groups,
# the GRU's, LSTM's and GCN's Adam, BERT's AdamW with its decay groups.
OPTIMISERS = {
    "SGD": lambda groups, **kw: torch.optim.SGD(groups, lr=0.1, momentum=0.9, dampening=0.0, nesterov=False, **kw),
    "Adam": lambda groups, **kw: torch.optim.Adam(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                                  **kw),
    "AdamW": lambda groups, **kw: torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, **kw),
}


def _fused_supported(device: str) -> bool:
    try:
        p = torch.nn.Parameter(torch.ones(2, device=device))
        p.grad = torch.ones(2, device=device)
        torch.optim.SGD([p], lr=0.1, momentum=0.9, fused=True).step()
        return True
    except RuntimeError:
        return False


@pytest.mark.parametrize("name", OPTIMISERS)
def test_the_fused_update_is_the_default_update(name):
    """On CUDA where there is one, else on the CPU's fused kernels (the same algorithm): five steps of the fused
    implementation give the default implementation's parameters."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not _fused_supported(device):
        pytest.skip(f"this torch has no fused optimisers on {device}")
    rng = np.random.default_rng(0)
    shapes = [(64, 32), (64,), (10, 64)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(5)]
    out = []
    for fused in (False, True):
        params = [torch.nn.Parameter(torch.from_numpy(a.copy()).to(device)) for a in init]
        groups = [{"params": params[:1], "weight_decay": 5e-4}, {"params": params[1:], "weight_decay": 0.0}]
        opt = OPTIMISERS[name](groups, **({"fused": True} if fused else {}))
        for step in grads:
            for p, g in zip(params, step, strict=True):
                p.grad = torch.from_numpy(g).to(device)
            opt.step()
        out.append([p.detach().cpu().numpy() for p in params])
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
