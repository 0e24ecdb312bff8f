"""aclImdb v1 (Maas et al., ACL 2011): the labelled IMDB movie reviews, 25,000 train / 25,000 test, balanced.
 Two layouts of the folder are accepted, both verified before load():
- the official `aclImdb_v1.tar.gz` (FILES; its sha256 as published beside the official file's Git LFS copy);
- the labelled splits repacked as two tarballs, `aclImdb_train_v1.tar.gz` and `aclImdb_test_v1.tar.gz` (SPLIT_FILES),
  each with a `*.members.sha256` list of its members' sha256 (sha256sum format), which load() also checks.
Either way the reviews are read from the tarballs directly (no extraction): `aclImdb/{train,test}/{pos,neg}/ID_R.txt`.
--download fetches the official tarball; from a mirror (HARNESS_DATA_MIRROR, harness/data/fetch.py) that has no
official tarball in its imdb folder, the two split tarballs instead.

load() returns the raw texts, so both frameworks see the very same text; tokenisation and the vocabulary (from the
train split only) live in harness/models/lstm:
    {"train": {"text": [25000 str], "label": int64 (25000,)}, "test": {...}}   label 1 = pos, 0 = neg,
ordered by (label, review id) for determinism.
"""

from __future__ import annotations

import hashlib
import re
import tarfile
from pathlib import Path

import numpy as np

from harness.data.fetch import NotOnMirror, download, verify
from harness.errors import HarnessError

FOLDER = "imdb_aclimdb"
OFFICIAL = "aclImdb_v1.tar.gz"
FILES = {OFFICIAL: "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"}
URLS = {OFFICIAL: "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"}
SPLIT_FILES = {"aclImdb_train_v1.tar.gz": "731d648f5a22655cdc3eb07f1b89e613aae70f8902c9dd5a808970a2de3e8ff5",
               "aclImdb_test_v1.tar.gz": "23728c43185497e309eb4f81dcbbf2912526f22653fe1c4f07039db4107db389"}
REVIEW = re.compile(r"^aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")
SIZES = {"train": 25000, "test": 25000}


# A profile's eval_samples cuts the evaluation reviews.
EVAL_LIMITED = True


def val_split_size(data: dict) -> int:
    """aclImdb has no validation split: the models evaluate on the test reviews."""
    return len(data["test"]["label"])


def prepare(folder: Path, allow_download: bool) -> Path:
    """Verify whichever layout the folder holds (the official tarball first); download the official one if allowed."""
    folder = Path(folder)
    if (folder / OFFICIAL).exists():
        verify(folder / OFFICIAL, FILES[OFFICIAL])
        return folder
    present = [name for name in SPLIT_FILES if (folder / name).exists()]
    if present:
        for name, sha in SPLIT_FILES.items():
            if not (folder / name).exists():
                raise HarnessError(f"data: {folder / name} is missing (its partner {present[0]} is there); copy both "
                                   f"split tarballs, or {OFFICIAL}, into {folder}, or run with --synthetic imdb")
            verify(folder / name, sha)
        return folder
    if not allow_download:
        raise HarnessError(f"data: {folder / OFFICIAL} is missing; copy it (or the two split tarballs "
                           f"{' and '.join(SPLIT_FILES)}) into {folder}, add --download to fetch and verify it, "
                           f"or run without it: --synthetic imdb")
    try:
        download(URLS[OFFICIAL], folder / OFFICIAL, FILES[OFFICIAL], "imdb")
    except NotOnMirror:
        # A mirror serving a data folder of the split layout (the two tarballs): fetch those, each against its pin.
        # Their members lists are not pinned, so they are not fetched; load() checks members only where a list is.
        try:
            for name, sha in SPLIT_FILES.items():
                download(None, folder / name, sha, "imdb")  # no upstream address: the mirror only
        except NotOnMirror:
            raise HarnessError(f"data: the mirror has neither {folder.name}/{OFFICIAL} nor both split tarballs "
                               f"({' and '.join(SPLIT_FILES)}); serve a data folder that holds one layout, unset "
                               f"HARNESS_DATA_MIRROR, or run without it: --synthetic imdb") from None
    return folder


def _members_sha256(path: Path) -> dict[str, str] | None:
    listing = path.with_name(path.name.removesuffix(".tar.gz") + ".members.sha256")
    if not listing.exists():
        return None
    out = {}
    for line in listing.read_text().splitlines():
        sha, _, name = line.partition("  ")
        out[name.strip()] = sha
    return out


def _read(tarball: Path, out: dict) -> None:
    expected = _members_sha256(tarball)
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            m = REVIEW.match(member.name)
            if not m or not member.isfile():
                continue
            raw = tar.extractfile(member).read()
            if expected is not None and expected.get(member.name) != hashlib.sha256(raw).hexdigest():
                raise HarnessError(f"data: {tarball} member {member.name} does not match its sha256 in the "
                                   f"members list; fetch the tarball again")
            split, polarity, rid, _ = m.groups()
            out[split].append((polarity == "pos", int(rid), raw.decode("utf-8")))


def load(folder: Path) -> dict:
    folder = Path(folder)
    tarballs = [folder / OFFICIAL] if (folder / OFFICIAL).exists() else [folder / n for n in SPLIT_FILES]
    rows: dict[str, list] = {"train": [], "test": []}
    for tarball in tarballs:
        _read(tarball, rows)
    out = {}
    for split, items in rows.items():
        if len(items) != SIZES[split]:
            raise HarnessError(f"data: {folder} holds {len(items)} labelled {split} reviews, not {SIZES[split]}")
        items.sort(key=lambda r: (r[0], r[1]))
        out[split] = {"text": [t for _, _, t in items], "label": np.array([int(p) for p, _, _ in items], np.int64)}
    return out


def synthetic(seed: int, n_train: int = 2000, n_test: int = 1000) -> dict:
    """A learnable stand-in of the same structure: reviews of 20-200 words from a 2000-word vocabulary (Zipf-like
    frequencies), in which a positive review draws 5% of its words from 50 'positive' words and a negative one from
    50 'negative' words; balanced labels, ordered as load() orders them (negatives first). The dict is marked
    `synthetic: True`: its words are a closed vocabulary, which BERT tokenises as words (harness/models/bert/vocab.py)
    where the real reviews need a WordPiece vocabulary."""
    rng = np.random.RandomState(seed)
    words = np.array([f"w{i}" for i in range(2000)])
    probs = 1.0 / np.arange(1, len(words) + 1)
    probs /= probs.sum()
    pos, neg = np.array([f"good{i}" for i in range(50)]), np.array([f"bad{i}" for i in range(50)])

    def make(n):
        labels = np.repeat([0, 1], [n - n // 2, n // 2]).astype(np.int64)
        texts = []
        for y in labels:
            k = rng.randint(20, 201)
            toks = words[rng.choice(len(words), k, p=probs)]
            hits = rng.random_sample(k) < 0.05
            toks[hits] = (pos if y else neg)[rng.randint(0, 50, hits.sum())]
            texts.append(" ".join(toks).capitalize() + ".<br /><br />The end.")
        return {"text": texts, "label": labels}

    return {"train": make(n_train), "test": make(n_test), "synthetic": True}
