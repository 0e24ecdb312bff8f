"""CIFAR-10 (Krizhevsky 2009), the official python version.

FILES pins the official tarball, as published (its sha256 is what Keras' cifar10.load_data checks; the
md5 torchvision checks is c58f30108f718f92721af3b95e74349a). The harness verifies the tarball before
load(); load() extracts `cifar-10-batches-py/` beside it once (later loads reuse the extracted folder; a
read-only data folder is extracted to a temporary directory for each load), its regular files only, on every
Python 3.11 (harness/data/archive.py), and reads data_batch_1..5 and test_batch, each a pickled dict with
b'data' (10000, 3072) uint8 rows of red, green and blue 32x32 planes and b'labels' (10000 ints).

Returns numpy arrays only, so both frameworks are fed the very same values:
    train_x (50000, 32, 32, 3) uint8 (NHWC, as decoded), train_y (50000,) int64
    test_x  (10000, 32, 32, 3) uint8,                     test_y  (10000,) int64
    num_classes 10, mean and std (3,) float32: per-channel statistics of train_x / 255
    label_names  list of the 10 class names
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from pathlib import Path

import numpy as np

from harness.data import archive
from harness.errors import HarnessError

FOLDER = "cifar10"
TARBALL = "cifar-10-python.tar.gz"
MEMBER_DIR = "cifar-10-batches-py"
FILES = {TARBALL: "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"}
URLS = {TARBALL: "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"}
TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"
META = "batches.meta"
NUM_CLASSES = 10
SIZES = {"train": 50000, "test": 10000}   # the real splits (the synthetic stand-in's are smaller)


# A profile's eval_samples cuts the evaluation images.
EVAL_LIMITED = True


def val_split_size(data: dict) -> int:
    """CIFAR-10 has no validation split: the models evaluate on the test images."""
    return len(data["test_y"])


def extract(folder: Path, into: Path | None = None) -> Path:
    """Extract the tarball's `cifar-10-batches-py/` into folder (or `into`) once and return that directory.
    Extraction goes to a temporary directory first, so an interrupted run never leaves half a folder. Only its
    regular files are extracted, on every Python 3.11 (harness/data/archive.py: Debian bookworm's 3.11.2 has no
    tarfile data filter)."""
    folder = Path(folder)
    into = folder if into is None else Path(into)
    out = into / MEMBER_DIR
    if (out / TEST_BATCH).exists():
        return out
    tmp = Path(tempfile.mkdtemp(dir=into, prefix=".extract."))
    try:
        names = archive.extract(folder / TARBALL, tmp, MEMBER_DIR)  # links, devices, `..` refused (archive.py)
        missing = [n for n in [*TRAIN_BATCHES, TEST_BATCH, META] if f"{MEMBER_DIR}/{n}" not in names]
        if missing:
            raise HarnessError(f"data: {folder / TARBALL} has no {MEMBER_DIR}/{missing[0]}; it is not the "
                               f"official CIFAR-10 python tarball; delete it and fetch it again")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp / MEMBER_DIR, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _unpickle(path: Path) -> dict:
    with open(path, "rb") as f:
        return pickle.load(f, encoding="bytes")  # the tarball's sha256 was verified before this


def _decode(batch: dict) -> tuple[np.ndarray, np.ndarray]:
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # planes R, G, B -> NHWC
    return np.ascontiguousarray(images), np.asarray(batch[b"labels"], dtype=np.int64)


def load(folder: Path) -> dict:
    folder = Path(folder)
    if (folder / MEMBER_DIR / TEST_BATCH).exists() or os.access(folder, os.W_OK):
        return _read(extract(folder))
    # A read-only data folder (a `-v data:/data:ro` mount) that was never extracted: extract for this load only.
    with tempfile.TemporaryDirectory(prefix="cifar10.") as tmp:
        return _read(extract(folder, into=Path(tmp)))


def _read(src: Path) -> dict:
    train = [_decode(_unpickle(src / name)) for name in TRAIN_BATCHES]
    test_x, test_y = _decode(_unpickle(src / TEST_BATCH))
    names = [n.decode() for n in _unpickle(src / META)[b"label_names"]]
    return _assemble(np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train]),
                     test_x, test_y, names)


def synthetic(seed: int, n_train: int = 5000, n_test: int = 1000) -> dict:
    """A learnable stand-in of CIFAR-10's shapes: each class has its own mean colour and a sinusoidal
    stripe texture (own orientation and frequency), images are randomly shifted and carry noise."""
    rng = np.random.RandomState(seed)
    colours = rng.uniform(60, 196, (NUM_CLASSES, 3))
    angles = np.arange(NUM_CLASSES) * np.pi / NUM_CLASSES
    freqs = 2 * np.pi * rng.uniform(0.15, 0.45, NUM_CLASSES)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32)

    def make(n):
        labels = rng.randint(0, NUM_CLASSES, n).astype(np.int64)
        phase = rng.uniform(0, 2 * np.pi, (n, 1, 1))
        a, f = angles[labels][:, None, None], freqs[labels][:, None, None]
        stripes = np.sin(f * (np.cos(a) * xx + np.sin(a) * yy) + phase)  # (n, 32, 32)
        img = colours[labels][:, None, None, :] + 40 * stripes[..., None] + rng.normal(0, 25, (n, 32, 32, 3))
        return np.clip(img, 0, 255).astype(np.uint8), labels

    train_x, train_y = make(n_train)
    test_x, test_y = make(n_test)
    return _assemble(train_x, train_y, test_x, test_y, [f"class{k}" for k in range(NUM_CLASSES)])


def _assemble(train_x, train_y, test_x, test_y, names) -> dict:
    # Per-channel mean and std of the training images in [0, 1], accumulated in float64 in chunks.
    total, sq, count = np.zeros(3), np.zeros(3), 0
    for i in range(0, len(train_x), 5000):
        chunk = train_x[i:i + 5000].reshape(-1, 3).astype(np.float64) / 255.0
        total += chunk.sum(0)
        sq += (chunk ** 2).sum(0)
        count += len(chunk)
    mean = total / count
    std = np.sqrt(np.maximum(sq / count - mean ** 2, 1e-12))
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y,
            "num_classes": NUM_CLASSES, "mean": mean.astype(np.float32), "std": std.astype(np.float32),
            "label_names": names}
