"""CIFAR-10 loader (on files written in the official python-pickle format), synthetic stand-in, and the
framework-neutral parts of ResNet50 (augmentation, schedule, weights)."""

import numpy as np
import pytest

from harness.data import cifar10, fixtures
from harness.models import resnet50 as rn
from tests.helpers import probe_model, rel_diff


@pytest.mark.parametrize("as_tarball", [False, True])
def test_load_decodes_the_official_format(tmp_path, as_tarball):
    fx = fixtures.cifar10(tmp_path, np.random.RandomState(0), n=20, as_tarball=as_tarball)
    e = fx.expected
    d = cifar10.load(tmp_path)
    assert d["train_x"].shape == (100, 32, 32, 3) and d["train_x"].dtype == np.uint8
    np.testing.assert_array_equal(d["train_x"], e["train_x"])
    np.testing.assert_array_equal(d["train_y"], e["train_y"])
    np.testing.assert_array_equal(d["test_x"], e["test_x"])
    np.testing.assert_array_equal(d["test_y"], e["test_y"])
    assert d["train_y"].dtype == np.int64 and d["num_classes"] == 10 and d["label_names"][9] == "truck"
    np.testing.assert_allclose(d["mean"], (e["train_x"] / 255.0).mean((0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(d["std"], (e["train_x"] / 255.0).std((0, 1, 2)), rtol=1e-4)
    if as_tarball:  # extracted once, beside the tarball; a second load reads the extracted files
        assert (tmp_path / cifar10.MEMBER_DIR / "test_batch").exists()
        assert sorted(p.name for p in (tmp_path / cifar10.MEMBER_DIR).iterdir()) == sorted(
            [*cifar10.TRAIN_BATCHES, cifar10.TEST_BATCH, cifar10.META, "readme.html"])
        assert not list(tmp_path.glob(".extract.*"))
        np.testing.assert_array_equal(cifar10.load(tmp_path)["test_x"], e["test_x"])


def test_files_pin_the_official_tarball():
    assert set(cifar10.FILES) == set(cifar10.URLS) == {"cifar-10-python.tar.gz"}
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in cifar10.FILES.values())


def test_synthetic_has_the_real_shapes_and_is_deterministic():
    a, b, c = cifar10.synthetic(7), cifar10.synthetic(7), cifar10.synthetic(8)
    assert a["train_x"].shape == (5000, 32, 32, 3) and a["test_x"].shape == (1000, 32, 32, 3)
    assert a["train_x"].dtype == np.uint8 and a["train_y"].dtype == np.int64 and a["num_classes"] == 10
    assert set(np.unique(a["train_y"])) == set(range(10))
    np.testing.assert_array_equal(a["train_x"], b["train_x"])
    assert not np.array_equal(a["train_x"], c["train_x"])


def test_synthetic_classes_are_separable_by_colour_and_texture():
    """Learnable: a nearest-class-mean classifier on raw pixels already beats chance by far."""
    d = cifar10.synthetic(3)
    x, xt = d["train_x"].reshape(5000, -1) / 255.0, d["test_x"].reshape(1000, -1) / 255.0
    means = np.stack([x[d["train_y"] == k].mean(0) for k in range(10)])
    pred = ((xt[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (pred == d["test_y"]).mean() > 0.3


def _batches(d, epoch, seed=5, batch=16, n=64):
    return list(rn.epoch_batches(d, epoch, seed, batch, n))


def test_augmentation_is_deterministic_per_seed_and_epoch_and_differs_across_epochs():
    d = cifar10.synthetic(1)
    a, b, c = _batches(d, 0), _batches(d, 0), _batches(d, 1)
    assert len(a) == 4 and a[0][0].shape == (16, 3, 32, 32) and a[0][0].dtype == np.float32
    assert a[0][1].dtype == np.int64
    for (xa, ya), (xb, yb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert not np.array_equal(np.concatenate([x for x, _ in a]), np.concatenate([x for x, _ in c]))
    # Every epoch visits each of the first n images once.
    assert sorted(np.concatenate([y for _, y in a]).tolist()) == sorted(d["train_y"][:64].tolist())
    assert not np.array_equal(_batches(d, 0, seed=6)[0][0], a[0][0])


def test_augment_is_a_padded_crop_and_a_flip():
    img = np.arange(32 * 32 * 3, dtype=np.int64).reshape(1, 32, 32, 3).astype(np.uint8)
    same = rn.augment(img, np.array([4]), np.array([4]), np.array([False]))
    np.testing.assert_array_equal(same, img)
    np.testing.assert_array_equal(rn.augment(img, np.array([4]), np.array([4]), np.array([True])), img[:, :, ::-1])
    shifted = rn.augment(img, np.array([0]), np.array([8]), np.array([False]))
    assert (shifted[0, :4] == 0).all() and (shifted[0, :, 28:] == 0).all()  # zero padding came in
    np.testing.assert_array_equal(shifted[0, 4:, :28], img[0, :28, 4:])


def test_eval_batches_pad_the_last_batch_to_a_fixed_shape():
    d = cifar10.synthetic(1)
    out = list(rn.eval_batches(d, 40, 16))
    assert [v for _, v in out] == [16, 16, 8] and all(x.shape == (16, 3, 32, 32) for x, _ in out)
    assert not out[-1][0][8:].any()


def test_lr_schedule_warms_up_linearly_then_decays_to_zero_at_the_last_step():
    lr = rn.lr_schedule(0.1, 1, 3, 4)
    assert len(lr) == 12
    np.testing.assert_allclose(lr[:4], [0.025, 0.05, 0.075, 0.1], rtol=1e-6)
    assert lr[4] == pytest.approx(0.1) and lr[-1] == 0.0 and np.all(np.diff(lr[4:]) <= 0)


def test_weights_have_resnet50_sizes_and_torchvision_init():
    w = rn.init_weights(0)
    trainable = {k: v for k, v in w.items() if not k.endswith(("running_mean", "running_var"))}
    assert sum(v.size for v in trainable.values()) == 23_520_842
    assert sum(1 for k in w if k.endswith("running_mean")) == 53 and sum(1 for v in w.values() if v.ndim == 4) == 53
    conv = w["layer3.0.conv2.weight"]  # 256 -> 256, 3x3: std sqrt(2 / (256 * 9)) (fan_out)
    assert conv.shape == (256, 256, 3, 3) and conv.std() == pytest.approx(np.sqrt(2 / (256 * 9)), rel=0.01)
    assert w["fc.weight"].shape == (10, 2048) and np.abs(w["fc.weight"]).max() <= 1 / np.sqrt(2048)
    assert (w["layer1.0.bn3.weight"] == 1).all() and (w["layer1.0.bn3.running_var"] == 1).all()
    np.testing.assert_array_equal(rn.init_weights(0)["conv1.weight"], w["conv1.weight"])
    decayed = {k for k in trainable if rn.decays(k)}
    assert decayed == {k for k, v in trainable.items() if v.ndim > 1}  # conv and dense weights, nothing else


def test_bn_running_statistics_agree_after_one_step(tmp_path):
    """tests/test_equivalence.py compares the loss after the probe step, which uses batch statistics; this
    compares the eval-mode output after it, which uses the BN running statistics the step updated
    (PyTorch momentum 0.1 == MindSpore momentum 0.9, unbiased running variance in both)."""
    pt = probe_model(tmp_path, "resnet50", "pytorch", "eager")
    ms = probe_model(tmp_path, "resnet50", "mindspore", "pynative")
    assert rel_diff(ms["after"], pt["after"]) <= 1e-3
    assert rel_diff(pt["after"], pt["forward"]) > 1e-3  # the step did change the running statistics
