"""Every dataset's real loader on small files in the dataset's exact on-disk format (harness/data/fixtures.py).
 Run inside each image under its own Python (tools/check_image.sh: `python /tools/check_datasets.py`), and by the test
suite. Per dataset it writes the fixture into a temporary folder, then makes the two calls a cell makes: the runner's
harness.data.prepare(NAME, DATA_DIR, allow_download=False) (sha256 of every file; the fixture's sha256 replaces the
pinned one of the real file, the only thing bypassed) and the training scenario's harness.data.<NAME>.load(FOLDER),
and compares what load() returns with what was written. It also checks that the real pins refuse the fixture.

    python tools/check_datasets.py [--only NAME[,NAME...]]

Prints one line per check (shapes, counts) and exits 0 when all pass; 1 with one line per failing check, naming
the dataset; 2 on bad arguments.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if (REPO / "harness" / "__init__.py").is_file():  # a checkout; in an image the harness comes from PYTHONPATH
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from harness import data as datasets  # noqa: E402
from harness.data import archive, fixtures  # noqa: E402
from harness.errors import HarnessError  # noqa: E402

DATASETS = ("cifar10", "cora", "multi30k", "imdb")


class CheckFailed(Exception):
    pass


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)


def prepare_and_load(name: str, root: Path, fx: fixtures.Fixture) -> dict:
    """What a cell does (runner: prepare; training scenario: load), with the fixture's sha256 pinned."""
    mod = datasets.module(name)
    try:  # the real pins must refuse the fixture: verification is on
        datasets.prepare(name, root, allow_download=False)
    except HarnessError as e:
        expect("sha256" in str(e), f"prepare() with the real pins failed, but not on a sha256: {e}")
    else:
        raise CheckFailed("prepare() with the real pinned sha256 accepted the fixture: nothing was verified")
    with fixtures.pinned(mod, fx.pins):
        folder = datasets.prepare(name, root, allow_download=False)
    expect(Path(folder) == fx.folder, f"prepare() gave {folder}, not {fx.folder}")
    return mod.load(folder)


def check_cifar10(root: Path, rng) -> list[str]:
    lines = []
    for readonly in (False, True):
        sub = root / ("ro" if readonly else "rw")
        fx = fixtures.cifar10(sub / "cifar10", rng, n=100)
        if readonly:
            os.chmod(fx.folder, 0o500)
            if os.access(fx.folder, os.W_OK):  # root writes anyway: that path is left to the tests
                os.chmod(fx.folder, 0o700)
                lines.append("cifar10   read-only data folder: not checked here (running as root, which writes "
                             "anyway; tests/test_fixtures.py covers it)")
                continue
        try:
            d = prepare_and_load("cifar10", sub, fx)
        finally:
            os.chmod(fx.folder, 0o700)
        e = fx.expected
        for key in ("train_x", "train_y", "test_x", "test_y"):
            expect(d[key].shape == e[key].shape and np.array_equal(d[key], e[key]),
                   f"load() {key} {d[key].shape} differs from the {e[key].shape} written")
        expect(d["train_x"].dtype == np.uint8 and d["train_y"].dtype == np.int64, "wrong dtypes")
        expect(d["label_names"] == e["label_names"], f"label names {d['label_names']}")
        extracted = (fx.folder / "cifar-10-batches-py").is_dir()
        expect(extracted != readonly, "extracted beside a read-only tarball" if readonly else "nothing extracted")
        where = "to a temporary folder (read-only data folder)" if readonly else "beside it"
        lines.append(f"cifar10   cifar-10-python.tar.gz, extracted {where} with {archive.method()}: "
                     f"train_x {d['train_x'].shape} {d['train_x'].dtype}, test_x {d['test_x'].shape}, "
                     f"{d['num_classes']} classes ({d['label_names'][0]} .. {d['label_names'][-1]}), "
                     f"mean {np.round(d['mean'], 3).tolist()}")
    return lines


def check_cora(root: Path, rng) -> list[str]:
    fx = fixtures.cora(root / "cora_planetoid", rng)
    d = prepare_and_load("cora", root, fx)
    e = fx.expected
    expect(d["num_nodes"] == e["num_nodes"] and d["num_classes"] == e["num_classes"],
           f"{d['num_nodes']} nodes / {d['num_classes']} classes, not {e['num_nodes']} / {e['num_classes']}")
    expect(np.allclose(d["features"], e["features"]), "features differ from the nodes' words, row-normalised")
    for key in ("labels", "train_idx", "val_idx", "test_idx"):
        expect(np.array_equal(d[key], e[key]), f"{key} differs from what was written")
    expect(len(d["adj_values"]) == e["nnz"], f"{len(d['adj_values'])} adjacency entries, not {e['nnz']}")
    return [f"cora      Planetoid ind.cora.* (Python 2 pickles: scipy.sparse.csr, defaultdict): features "
            f"{d['features'].shape}, {d['num_classes']} classes, split {len(d['train_idx'])}/{len(d['val_idx'])}/"
            f"{len(d['test_idx'])}, {len(d['adj_values'])} adjacency entries"]


def check_multi30k(root: Path, rng) -> list[str]:
    fx = fixtures.multi30k(root / "multi30k_task1", rng)
    d = prepare_and_load("multi30k", root, fx)
    expect(d == fx.expected, "the sentences load() returned differ from the ones written")
    counts = ", ".join(f"{s} {len(d[s]['en'])}" for s in ("train", "val", "test"))
    return [f"multi30k  task 1 raw *.{{en,fr}}.gz: en-fr pairs {counts}"]


def check_imdb(root: Path, rng) -> list[str]:
    lines = []
    for layout in ("official", "split"):
        fx = fixtures.imdb(root / layout / "imdb_aclimdb", rng, layout=layout)
        d = prepare_and_load("imdb", root / layout, fx)
        for split in ("train", "test"):
            expect(d[split]["text"] == fx.expected[split]["text"], f"{layout} layout: {split} texts differ")
            expect(d[split]["label"].tolist() == fx.expected[split]["label"], f"{layout} layout: {split} labels differ")
        files = " + ".join(sorted(fx.pins)) + (" with their members lists" if layout == "split" else "")
        lines.append(f"imdb      {files}: reviews train {len(d['train']['text'])} "
                     f"({int(d['train']['label'].sum())} pos), test {len(d['test']['text'])} "
                     f"({int(d['test']['label'].sum())} pos)")
    return lines


CHECKS = {"cifar10": check_cifar10, "cora": check_cora, "multi30k": check_multi30k, "imdb": check_imdb}


def main(argv: list[str]) -> int:
    names = list(DATASETS)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if argv:
        if argv[0] != "--only" or len(argv) != 2:
            print(f"error: unknown arguments {' '.join(argv)}; usage: check_datasets.py [--only NAME[,NAME...]]",
                  file=sys.stderr)
            return 2
        names = argv[1].split(",")
        unknown = [n for n in names if n not in CHECKS]
        if unknown:
            print(f"error: no dataset check named {unknown[0]}; choose from {', '.join(DATASETS)}", file=sys.stderr)
            return 2
    harness_dir = Path(datasets.__file__).resolve().parent.parent
    print(f"check_datasets: Python {sys.version.split()[0]} ({sys.executable}), harness {harness_dir}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="check-datasets.") as tmp:
        for name in names:
            t = time.perf_counter()
            try:
                lines = CHECKS[name](Path(tmp) / name, np.random.RandomState(20221122))
            except Exception as e:  # noqa: BLE001 (any failure is one line naming the dataset)
                failed.append(name)
                reason = str(e) if isinstance(e, CheckFailed | HarnessError) else f"{type(e).__name__}: {e}"
                print(f"check_datasets: FAILED: {name}: {reason}", file=sys.stderr)
                continue
            for line in lines:
                print(f"check_datasets: ok  {line}  [{time.perf_counter() - t:.1f} s]")
    if failed:
        print(f"check_datasets: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"check_datasets: OK: the real loaders of {', '.join(names)} read their format-faithful fixtures")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
