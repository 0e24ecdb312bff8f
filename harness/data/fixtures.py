"""Small files in the exact on-disk format of each real dataset, to run the real loaders without the real data.
 The tests and tools/check_datasets.py (run inside every image, under its own Python) use these writers. Each writes a
dataset's folder as harness/data/<name>.py reads it, and returns a Fixture: the folder, `pins` (the sha256 of each
file the module pins; the one thing a check replaces, with `pinned()`) and `expected` (what load() must return).

- cifar10: `cifar-10-python.tar.gz` as published: a `cifar-10-batches-py/` directory member, `data_batch_1..5`,
  `test_batch`, `batches.meta` and `readme.html`; the batches are Python 2 pickles (below) of dicts with str keys
  `batch_label`, `labels`, `data` ((n, 3072) uint8 rows: 1024 red, 1024 green, 1024 blue) and `filenames`.
- cora: Planetoid's `ind.cora.{x,y,tx,ty,allx,ally,graph,test.index}`: Python 2 pickles of `scipy.sparse.csr`
  `csr_matrix` objects (x, tx, allx), one-hot int32 arrays (y, ty, ally), a `collections.defaultdict(list)` adjacency
  list (graph), and the test node ids as text, one per line, unsorted. The harness reads no other Cora layout.
- multi30k: task 1 raw, `{train,val,test_2016_flickr}.{en,fr,de}.gz`: gzip, UTF-8, one sentence a line.
- imdb: the official `aclImdb_v1.tar.gz` (`aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt`, plus `train/unsup`,
  the `urls_*.txt`, `imdb.vocab`, `imdbEr.txt`, `README`), or the split layout the shared copy uses (two tarballs
  and their `*.members.sha256` lists).

Python 2 pickles: the real CIFAR-10 and Planetoid files were written by Python 2's cPickle, protocol 2: str as
BINSTRING opcodes (which Python 3 reads as bytes or decodes, per `encoding`), numpy arrays through
`numpy.core.multiarray._reconstruct` with their raw bytes as a str, a csr_matrix as NEWOBJ + its __dict__, and
module `__builtin__`. Python 3's pickle writes none of these the same way, so py2_pickle() writes those opcodes
itself; tests/test_fixtures.py checks that it reproduces the real Planetoid files byte for byte (after
pickletools.optimize(), which drops the memo entries nothing refers back to).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import struct
import tarfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np


@dataclass
class Fixture:
    folder: Path
    pins: dict[str, str]
    expected: dict = field(default_factory=dict)


@contextlib.contextmanager
def pinned(mod: ModuleType, pins: dict[str, str]):
    """Within the block, the module's FILES (and SPLIT_FILES) pin the fixture's files instead of the real ones."""
    saved = {}
    for attr in ("FILES", "SPLIT_FILES"):
        table = getattr(mod, attr, None)
        if isinstance(table, dict) and set(pins) & set(table):
            saved[attr] = table
            setattr(mod, attr, {**table, **{k: v for k, v in pins.items() if k in table}})
    try:
        yield
    finally:
        for attr, table in saved.items():
            setattr(mod, attr, table)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# --- Python 2 (cPickle, protocol 2) pickles -------------------------------------------------------------------------

@dataclass
class Csr:
    """A scipy.sparse csr_matrix as Python 2 pickled it (no scipy needed to write one)."""
    shape: tuple[int, int]
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @classmethod
    def from_dense(cls, dense: np.ndarray) -> Csr:
        rows, cols = np.nonzero(dense)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
        return cls(dense.shape, indptr.astype(np.int32), cols.astype(np.int32), dense[rows, cols].astype(np.float32))


class _Py2Pickler:
    """cPickle memoizes what it writes and refers back to an object it met before (a class, a dtype): globals and
    dtypes are memoized here the same way; other objects are written afresh (what a memo-less reader sees)."""

    def __init__(self):
        self.out = io.BytesIO()
        self.memo: dict[tuple, int] = {}

    def w(self, *parts: bytes) -> None:
        for p in parts:
            self.out.write(p)

    def recall(self, key: tuple) -> bool:
        """Write a BINGET of key if it was memoized."""
        if key not in self.memo:
            return False
        i = self.memo[key]
        self.w(b"h" + struct.pack("<B", i) if i < 256 else b"j" + struct.pack("<I", i))
        return True

    def remember(self, key: tuple) -> None:
        i = self.memo[key] = len(self.memo)
        self.w(b"q" + struct.pack("<B", i) if i < 256 else b"r" + struct.pack("<I", i))

    def glob(self, module: str, name: str) -> None:
        if not self.recall(("global", module, name)):
            self.w(b"c", module.encode(), b"\n", name.encode(), b"\n")
            self.remember(("global", module, name))

    def dump(self, obj) -> None:  # noqa: C901 (one branch per type)
        if obj is None:
            self.w(b"N")
        elif obj is True or obj is False:
            self.w(b"\x88" if obj else b"\x89")
        elif isinstance(obj, int | np.integer):
            obj = int(obj)
            if 0 <= obj < 256:
                self.w(b"K", struct.pack("<B", obj))
            elif 0 <= obj < 65536:
                self.w(b"M", struct.pack("<H", obj))
            else:
                self.w(b"J", struct.pack("<i", obj))
        elif isinstance(obj, str):  # a Python 2 str (bytes); these files hold ASCII names only
            self.dump(obj.encode("ascii"))
        elif isinstance(obj, bytes):
            if len(obj) < 256:
                self.w(b"U", struct.pack("<B", len(obj)), obj)
            else:
                self.w(b"T", struct.pack("<i", len(obj)), obj)
        elif isinstance(obj, tuple):
            if not obj:
                self.w(b")")
            elif len(obj) <= 3:
                for x in obj:
                    self.dump(x)
                self.w(b"\x85\x86\x87"[len(obj) - 1:len(obj)])
            else:
                self.w(b"(")
                for x in obj:
                    self.dump(x)
                self.w(b"t")
        elif isinstance(obj, defaultdict):  # defaultdict(list), as Planetoid's graph
            self.glob("collections", "defaultdict")
            self.glob("__builtin__", obj.default_factory.__name__)
            self.w(b"\x85R")
            self._items(list(obj.items()))
        elif isinstance(obj, dict):
            self.w(b"}")
            self._items(list(obj.items()))
        elif isinstance(obj, list):
            self.w(b"]")
            for i in range(0, len(obj), 1000):  # cPickle's batches
                chunk = obj[i:i + 1000]
                if len(chunk) == 1:
                    self.dump(chunk[0])
                    self.w(b"a")
                else:
                    self.w(b"(")
                    for x in chunk:
                        self.dump(x)
                    self.w(b"e")
        elif isinstance(obj, np.ndarray):
            self._array(obj)
        elif isinstance(obj, Csr):
            self.glob("scipy.sparse.csr", "csr_matrix")
            self.w(b")\x81")
            self.dump({"format": "csr", "_shape": tuple(obj.shape), "indptr": obj.indptr,
                       "_cs_matrix__has_sorted_indices": True, "indices": obj.indices, "maxprint": 50,
                       "data": obj.data})
            self.w(b"b")
        else:
            raise TypeError(f"py2_pickle cannot write {type(obj).__name__}")

    def _items(self, items: list) -> None:
        for i in range(0, len(items), 1000):
            chunk = items[i:i + 1000]
            if len(chunk) == 1:
                self.dump(chunk[0][0])
                self.dump(chunk[0][1])
                self.w(b"s")
            else:
                self.w(b"(")
                for k, v in chunk:
                    self.dump(k)
                    self.dump(v)
                self.w(b"u")

    def _array(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        self.glob("numpy.core.multiarray", "_reconstruct")
        self.glob("numpy", "ndarray")
        self.dump((0,))
        self.dump(b"b")
        self.w(b"\x87R")  # _reconstruct(ndarray, (0,), 'b')
        self.w(b"(")
        self.dump(1)
        self.dump(tuple(a.shape))
        if not self.recall(("dtype", a.dtype.str[1:])):
            self.glob("numpy", "dtype")
            self.dump((a.dtype.str[1:], 0, 1))
            self.w(b"R")
            self.remember(("dtype", a.dtype.str[1:]))
            order = "|" if a.dtype.itemsize == 1 else "<"
            self.dump((3, order, None, None, None, -1, -1, 0))
            self.w(b"b")
        self.dump(False)
        self.dump(a.astype(a.dtype.newbyteorder("<")).tobytes())
        self.w(b"tb")


def py2_pickle(obj) -> bytes:
    """obj pickled as Python 2's cPickle.dump(obj, f, 2) wrote it (the memo opcodes of what is never referred back
    to aside: pickletools.optimize() of the two is the same)."""
    p = _Py2Pickler()
    p.w(b"\x80\x02")
    p.dump(obj)
    p.w(b".")
    return p.out.getvalue()


def _tar(path: Path, entries: list[tuple[str, bytes | None]]) -> None:
    """A gzip tarball of (name, content) entries, content None for a directory, in the given order."""
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT, compresslevel=6) as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1_250_000_000
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))


# --- CIFAR-10 -------------------------------------------------------------------------------------------------------

CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def cifar10(folder: Path, rng: np.random.RandomState, n: int = 20, as_tarball: bool = True) -> Fixture:
    """n images per batch (the real batches hold 10000). as_tarball=False writes the extracted folder instead."""
    from harness.data import cifar10 as mod

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files, expected = {}, {"train_x": [], "train_y": []}
    for k in range(1, 7):
        images = rng.randint(0, 256, (n, 32, 32, 3)).astype(np.uint8)
        labels = rng.randint(0, 10, n)
        rows = images.transpose(0, 3, 1, 2).reshape(n, 3072)  # R plane, G plane, B plane; each row-major
        label = f"training batch {k} of 5" if k <= 5 else "testing batch 1 of 1"
        batch = {"batch_label": label, "labels": [int(v) for v in labels], "data": rows,
                 "filenames": [f"fixture_{k}_{i}.png" for i in range(n)]}
        files[f"data_batch_{k}" if k <= 5 else mod.TEST_BATCH] = py2_pickle(batch)
        if k <= 5:
            expected["train_x"].append(images)
            expected["train_y"].append(labels)
        else:
            expected["test_x"], expected["test_y"] = images, labels
    files[mod.META] = py2_pickle({"num_cases_per_batch": n, "label_names": CIFAR10_NAMES, "num_vis": 3072})
    files["readme.html"] = b"<meta HTTP-EQUIV=\"REFRESH\" content=\"0; url=http://www.cs.toronto.edu/~kriz/cifar.html\">\n"
    expected = {"train_x": np.concatenate(expected["train_x"]), "train_y": np.concatenate(expected["train_y"]),
                "test_x": expected["test_x"], "test_y": expected["test_y"], "label_names": CIFAR10_NAMES}
    order = ["data_batch_4", "readme.html", "test_batch", "data_batch_3", "batches.meta", "data_batch_2",
             "data_batch_5", "data_batch_1"]
    if not as_tarball:
        (folder / mod.MEMBER_DIR).mkdir(parents=True, exist_ok=True)
        for name in order:
            (folder / mod.MEMBER_DIR / name).write_bytes(files[name])
        return Fixture(folder, {}, expected)
    _tar(folder / mod.TARBALL, [(mod.MEMBER_DIR, None)] + [(f"{mod.MEMBER_DIR}/{k}", files[k]) for k in order])
    return Fixture(folder, {mod.TARBALL: sha256(folder / mod.TARBALL)}, expected)


# --- Cora (Planetoid) -----------------------------------------------------------------------------------------------

def cora(folder: Path, rng: np.random.RandomState, n_train: int = 20, n_unlabelled: int = 40, n_test: int = 100,
         n_features: int = 50, n_classes: int = 7) -> Fixture:
    """A small graph in Planetoid's files: allx holds the n_train labelled nodes (x), the 500 the harness validates
    on and n_unlabelled more; tx the n_test test nodes, whose ids ind.cora.test.index lists unsorted."""
    from harness.data import cora as mod

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n_all = n_train + mod.N_VAL + n_unlabelled
    n = n_all + n_test
    words = (rng.random_sample((n, n_features)) < 0.1).astype(np.float32)
    words[np.arange(n), rng.randint(0, n_features, n)] = 1.0  # every node has a word
    labels = rng.randint(0, n_classes, n)
    onehot = np.eye(n_classes, dtype=np.int32)[labels]
    test_order = n_all + rng.permutation(n_test)               # tx row k is node test_order[k]
    graph = defaultdict(list)
    for i in range(n):
        graph[i] = [int(j) for j in rng.randint(0, n, rng.randint(1, 5))]
    arrays = {"x": Csr.from_dense(words[:n_train]), "y": onehot[:n_train],
              "tx": Csr.from_dense(words[test_order]), "ty": onehot[test_order],
              "allx": Csr.from_dense(words[:n_all]), "ally": onehot[:n_all], "graph": graph}
    for name, obj in arrays.items():
        (folder / f"ind.cora.{name}").write_bytes(py2_pickle(obj))
    (folder / "ind.cora.test.index").write_text("".join(f"{i}\n" for i in test_order))
    edges = {(i, j) for i, nbrs in graph.items() for j in nbrs if i != j}
    expected = {"features": words / words.sum(1, keepdims=True), "labels": labels.astype(np.int64),
                "train_idx": np.arange(n_train), "val_idx": np.arange(n_train, n_train + mod.N_VAL),
                "test_idx": np.arange(n_all, n), "num_nodes": n, "num_classes": n_classes,
                "nnz": len(edges | {(j, i) for i, j in edges}) + n}
    return Fixture(folder, {name: sha256(folder / name) for name in mod.FILES}, expected)


def _sentences(rng: np.random.RandomState, vocab: list[str], n: int, low: int, high: int) -> list[list[str]]:
    """n random word lists of low..high-1 words each."""
    lengths = rng.randint(low, high, n)
    words = np.array(vocab)[rng.randint(0, len(vocab), int(lengths.sum()))].tolist()
    ends = np.cumsum(lengths).tolist()
    return [words[end - k:end] for k, end in zip(lengths.tolist(), ends, strict=True)]


# --- Multi30K task 1 ------------------------------------------------------------------------------------------------

_EN = ["A", "man", "woman", "dog", "in", "a", "red", "shirt", "is", "walking", "on", "the", "street", "café"]
_FR = ["Un", "homme", "femme", "chien", "dans", "une", "chemise", "rouge", "marche", "sur", "la", "rue", "à", "été"]
_DE = ["Ein", "Mann", "Frau", "Hund", "in", "einem", "roten", "Hemd", "geht", "auf", "der", "Straße", "über"]


def multi30k(folder: Path, rng: np.random.RandomState, sizes: dict[str, int] | None = None) -> Fixture:
    """sizes: sentences per split (default the real counts: train 29000, val 1014, test 1000)."""
    from harness.data import multi30k as mod

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sizes = sizes or mod.SIZES
    expected = {}
    for split, stem in mod.SPLITS.items():
        text = {}
        for lang, vocab in (("en", _EN), ("fr", _FR), ("de", _DE)):
            lines = [" ".join(words).capitalize() + "." for words in _sentences(rng, vocab, sizes[split], 3, 12)]
            with gzip.GzipFile(folder / f"{stem}.{lang}.gz", "wb", mtime=0) as f:
                f.write("".join(line + "\n" for line in lines).encode("utf-8"))
            text[lang] = lines
        expected[split] = {"en": text["en"], "fr": text["fr"]}
    return Fixture(folder, {name: sha256(folder / name) for name in mod.FILES}, expected)


# --- aclImdb --------------------------------------------------------------------------------------------------------

def imdb(folder: Path, rng: np.random.RandomState, per_class: int = 12500, layout: str = "official") -> Fixture:
    """per_class reviews of each polarity in each split (the real count is 12500: load() checks 25000 per split);
    layout "official" (aclImdb_v1.tar.gz) or "split" (the two split tarballs and their members lists)."""
    from harness.data import imdb as mod

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    words = ["great", "awful", "film", "movie", "plot", "acting", "bad", "good", "naïve", "scene"]
    entries: dict[str, list] = {"train": [("aclImdb/train", None)], "test": [("aclImdb/test", None)]}
    expected = {}
    for split in ("train", "test"):
        rows = []
        for polarity, ratings in (("neg", (1, 5)), ("pos", (7, 11))):
            entries[split].append((f"aclImdb/{split}/{polarity}", None))
            stars = rng.randint(*ratings, per_class).tolist()
            for rid, review in enumerate(_sentences(rng, words, per_class, 2, 9)):
                text = " ".join(review).capitalize() + (".<br /><br />" if rid % 3 == 0 else ".")
                entries[split].append((f"aclImdb/{split}/{polarity}/{rid}_{stars[rid]}.txt", text.encode("utf-8")))
                rows.append((polarity == "pos", rid, text))
            entries[split].append((f"aclImdb/{split}/urls_{polarity}.txt",
                                   b"http://www.imdb.com/title/tt0000000/usercomments\n" * per_class))
        entries[split].append((f"aclImdb/{split}/labeledBow.feat", b"0:9 1:1\n"))
        rows.sort(key=lambda r: (r[0], r[1]))
        expected[split] = {"text": [t for _, _, t in rows], "label": [int(p) for p, _, _ in rows]}
    entries["train"] += [("aclImdb/train/unsup", None), ("aclImdb/train/unsup/0_0.txt", b"Unlabelled review."),
                         ("aclImdb/train/urls_unsup.txt", b"http://www.imdb.com/title/tt0000001/usercomments\n")]
    top = [("aclImdb", None), ("aclImdb/README", b"Large Movie Review Dataset v1.0 (fixture)\n"),
           ("aclImdb/imdb.vocab", "\n".join(words).encode() + b"\n"), ("aclImdb/imdbEr.txt", b"0.1\n" * len(words))]
    if layout == "official":
        _tar(folder / mod.OFFICIAL, top + entries["train"] + entries["test"])
        return Fixture(folder, {mod.OFFICIAL: sha256(folder / mod.OFFICIAL)}, expected)
    if layout != "split":
        raise ValueError(f"imdb fixture layout '{layout}': choose official or split")
    pins = {}
    for split in ("train", "test"):
        name = f"aclImdb_{split}_v1.tar.gz"  # the names mod.SPLIT_FILES pins
        members = (top if split == "test" else [("aclImdb", None)]) + entries[split]
        _tar(folder / name, members)
        listing = "".join(f"{hashlib.sha256(c).hexdigest()}  {n}\n" for n, c in members if c is not None)
        (folder / name.replace(".tar.gz", ".members.sha256")).write_text(listing)
        pins[name] = sha256(folder / name)
    return Fixture(folder, pins, expected)
