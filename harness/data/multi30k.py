"""Multi30K task 1 (Elliott et al. 2016, 2017): English-French image descriptions, raw (untokenised).
 load(folder) returns the raw sentences only, so both frameworks see the very same text; the
tokenisation, vocabularies and batching (framework-neutral numpy) live in harness/models/gru:
    {"train": {"en": [29000 str], "fr": [...]}, "val": {... 1014}, "test": {... 1000}}
"test" is the 2016 Flickr test set (test_2016_flickr).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

FOLDER = "multi30k_task1"
_BASE = "https://github.com/multi30k/dataset/raw/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/"
FILES = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
}
URLS = {name: _BASE + name for name in FILES}
SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}
LANGS = ("en", "fr")
SIZES = {"train": 29000, "val": 1014, "test": 1000}


# A profile's val_samples / eval_samples cuts the validation sentence pairs.
EVAL_LIMITED = True


def val_split_size(data: dict) -> int:
    """The validation sentence pairs."""
    return len(data["val"]["fr"])


def _read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]  # hashes were verified before this


def load(folder: Path) -> dict:
    out = {split: {lang: _read(Path(folder) / f"{stem}.{lang}.gz") for lang in LANGS}
           for split, stem in SPLITS.items()}
    for split, langs in out.items():
        if len(langs["en"]) != len(langs["fr"]):
            raise ValueError(f"multi30k {split}: {len(langs['en'])} English but {len(langs['fr'])} French lines")
    return out


def synthetic(seed: int) -> dict:
    """A learnable stand-in of the same structure and sizes: random English-like sentences (3-14 words
    from a 300-word vocabulary, Zipf-like frequencies, capitalised, ending with '.') and their
    deterministic word-by-word 'French' translation (a fixed random word map)."""
    rng = np.random.RandomState(seed)
    n_words = 300
    en_words = np.array([f"w{i}" for i in range(n_words)])
    fr_words = np.array([f"m{j}" for j in rng.permutation(n_words)])
    probs = 1.0 / np.arange(1, n_words + 1)
    probs /= probs.sum()
    out = {}
    for split, n in SIZES.items():
        lengths = rng.randint(3, 15, n)
        words = rng.choice(n_words, int(lengths.sum()), p=probs)
        ends = np.cumsum(lengths)
        en, fr = [], []
        for start, end in zip(ends - lengths, ends, strict=True):
            idx = words[start:end]
            en.append(" ".join(en_words[idx]).capitalize() + ".")
            fr.append(" ".join(fr_words[idx]).capitalize() + ".")
        out[split] = {"en": en, "fr": fr}
    return out
