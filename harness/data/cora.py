"""Cora citation graph with the Planetoid split (Yang et al. 2016), as used by GCN (Kipf & Welling 2017).
 Returns numpy arrays only, so both frameworks are fed the very same values:
    features    (2708, 1433) float32, row-normalised bag of words (Kipf's preprocess_features)
    labels      (2708,) int64
    adj_indices (nnz, 2) int64 and adj_values (nnz,) float32: D^-1/2 (A + I) D^-1/2, symmetric
    train_idx (140), val_idx (500), test_idx (1000) int64
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

FOLDER = "cora_planetoid"
_BASE = "https://github.com/kimiyoung/planetoid/raw/af6abf468a772cc055bec88c52e4d6f51b7c37e3/data/"
FILES = {
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
}
URLS = {name: _BASE + name for name in FILES}
N_TRAIN, N_VAL = 140, 500


class _Unpickler(pickle.Unpickler):
    """The files are Python 2 pickles naming `scipy.sparse.csr`, a module SciPy 2 removes: map such
    names to the public `scipy.sparse` namespace."""

    def find_class(self, module, name):
        if module.startswith("scipy.sparse."):
            module = "scipy.sparse"
        return super().find_class(module, name)


# Planetoid's validation split is fixed (500 nodes) and read whole by every profile.
EVAL_LIMITED = False


def val_split_size(data: dict) -> int:
    """The validation nodes (Planetoid's split: 500)."""
    return len(data["val_idx"])


def load(folder: Path) -> dict:
    def unpickle(name):
        with open(Path(folder) / f"ind.cora.{name}", "rb") as f:
            return _Unpickler(f, encoding="latin1").load()  # hashes were verified before this

    x, y, tx, ty, allx, ally, graph = (unpickle(n) for n in ("x", "y", "tx", "ty", "allx", "ally", "graph"))
    test_order = np.loadtxt(Path(folder) / "ind.cora.test.index", dtype=np.int64)
    test_sorted = np.sort(test_order)
    # The test rows are stored in sorted order; put them back at their node indices (as Kipf's utils do).
    features = np.vstack([allx.toarray(), tx.toarray()]).astype(np.float32)
    onehot = np.vstack([ally, ty])
    features[test_order] = features[test_sorted]
    onehot[test_order] = onehot[test_sorted]
    n = features.shape[0]
    edges = np.array([(i, j) for i, nbrs in graph.items() for j in nbrs], dtype=np.int64)
    return _assemble(features, onehot.argmax(1).astype(np.int64), edges, n,
                     np.arange(len(y)), np.arange(len(y), len(y) + N_VAL), test_sorted)


def synthetic(seed: int) -> dict:
    """A learnable stand-in of Cora's shapes: a 7-block stochastic block model whose nodes carry
    class-specific words, so a GCN reaches Cora-like accuracy on it."""
    rng = np.random.RandomState(seed)
    n, f, c = 2708, 1433, 7
    labels = rng.randint(0, c, n).astype(np.int64)
    topic_words = rng.permutation(f)[: c * 60].reshape(c, 60)
    features = np.zeros((n, f), np.float32)
    for i in range(n):
        own = rng.choice(topic_words[labels[i]], 6, replace=False)
        noise = rng.randint(0, f, 12)
        features[i, own] = 1.0
        features[i, noise] = 1.0
    by_class = [np.flatnonzero(labels == k) for k in range(c)]
    intra = np.array([(i, rng.choice(by_class[labels[i]])) for i in range(n) for _ in range(2)])
    inter = rng.randint(0, n, (n // 2, 2))
    edges = np.vstack([intra, inter]).astype(np.int64)
    train = np.concatenate([rng.choice(idx, 20, replace=False) for idx in by_class])
    rest = rng.permutation(np.setdiff1d(np.arange(n), train))
    return _assemble(features, labels, edges, n, np.sort(train), np.sort(rest[:N_VAL]),
                     np.sort(rest[N_VAL:N_VAL + 1000]))


def _assemble(features, labels, edges, n, train_idx, val_idx, test_idx) -> dict:
    rowsum = features.sum(1, keepdims=True)
    features = features / np.where(rowsum == 0, 1, rowsum)
    # Undirected, binary, no self-loops and no duplicates; then add I and normalise symmetrically.
    edges = edges[edges[:, 0] != edges[:, 1]]
    pairs = np.unique(np.vstack([edges, edges[:, ::-1]]), axis=0)
    pairs = np.vstack([pairs, np.repeat(np.arange(n)[:, None], 2, 1)])
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    deg = np.bincount(pairs[:, 0], minlength=n).astype(np.float64)
    values = (1.0 / np.sqrt(deg[pairs[:, 0]] * deg[pairs[:, 1]])).astype(np.float32)
    return {"features": features.astype(np.float32), "labels": labels, "adj_indices": pairs,
            "adj_values": values, "num_nodes": n, "num_classes": int(labels.max()) + 1,
            "train_idx": np.asarray(train_idx, np.int64), "val_idx": np.asarray(val_idx, np.int64),
            "test_idx": np.asarray(test_idx, np.int64)}
