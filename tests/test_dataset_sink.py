"""MindSpore dataset sinking: when it is used, and that the sunk dataset feeds the very batches, in the very
order, that the loop without sinking (and PyTorch) sees. mindspore.data_sink itself runs only on Ascend/GPU, so
here it is replaced by a stand-in that drains the same dataset the same way (sink_size steps per call)."""

from types import SimpleNamespace

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")

from harness.models import _mindspore as ms_models  # noqa: E402


def _ctx(platform, mode):
    return SimpleNamespace(platform=platform, cell=SimpleNamespace(mode=mode), settings={})


@pytest.mark.parametrize(("platform", "mode", "fixed", "on"), [
    ("ascend", "graph", True, True), ("cuda", "graph", True, True), ("cpu", "graph", True, False),
    ("ascend", "pynative", True, False), ("cuda", "graph", False, False)])
def test_sinking_only_in_graph_mode_on_devices_with_fixed_shapes(platform, mode, fixed, on):
    ctx = _ctx(platform, mode)
    assert ms_models.dataset_sink(ctx, fixed_shapes=fixed)[0] is on
    assert ctx.settings["dataset_sink"] is on and ctx.settings["dataset_sink_why"]


def test_sunk_epochs_feed_every_epoch_in_order(monkeypatch):
    def data_sink(fn, dataset, sink_size):  # what ms.data_sink does, without a device queue
        it = dataset.create_tuple_iterator(output_numpy=True)
        return lambda: [fn(*next(it)) for _ in range(sink_size)][-1]

    monkeypatch.setattr(ms, "data_sink", data_sink)

    def batches(epoch):
        rng = np.random.default_rng([7, epoch])
        for _ in range(3):
            yield rng.normal(size=(2, 3)).astype(np.float32), rng.integers(0, 10, 2).astype(np.int32)

    seen = []
    sunk = ms_models.SunkEpochs(lambda x, y: seen.append((x, y)) or float(x.sum()), batches, epochs=2,
                                 steps_per_epoch=3, columns=["x", "y"])
    last = [sunk() for _ in range(2)]
    want = [b for epoch in range(2) for b in batches(epoch)]
    assert len(seen) == len(want) == 6
    for (x, y), (wx, wy) in zip(seen, want, strict=True):
        np.testing.assert_array_equal(x, wx)
        np.testing.assert_array_equal(y, wy)
    assert last == [pytest.approx(float(want[2][0].sum())), pytest.approx(float(want[5][0].sum()))]
