"""Datasets: one module per dataset (`harness/data/<name>.py`), each a `harness.contracts.DatasetModule`

    FOLDER   the folder name under a data dir (laid out like ../shared/data)
    FILES    {file name: pinned sha256}
    URLS     {file name: download URL}
    load(folder: Path) -> dict          real data as numpy arrays
    synthetic(seed: int) -> dict        learnable stand-in of the same shapes

and optionally `prepare(folder, allow_download) -> Path` (a `contracts.SelfPreparingDataset`). Adding a dataset
means adding one such module; tests/test_contracts.py checks it. archive.py, fetch.py and fixtures.py are helpers.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, cast

from harness.contracts import DatasetModule, SelfPreparingDataset
from harness.data.fetch import download, verify
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.context import CellContext


def module(name: str) -> DatasetModule:
    try:
        return cast(DatasetModule, importlib.import_module(f"harness.data.{name}"))
    except ModuleNotFoundError:
        raise HarnessError(f"dataset '{name}' has no module harness/data/{name}.py; add one") from None


def for_context(ctx: CellContext) -> dict:
    """The cell's data in this process: its dataset's synthetic(seed) with synthetic data, else load(folder) from
    the verified folder."""
    ds = module(ctx.cell.dataset)
    return ds.synthetic(ctx.seed) if ctx.synthetic else ds.load(ctx.data_folder)


def prepare(name: str, data_dir: Path, allow_download: bool) -> Path:
    """Return the dataset's verified folder under data_dir, downloading missing files if allowed."""
    mod = module(name)
    folder = Path(data_dir) / mod.FOLDER
    if isinstance(mod, SelfPreparingDataset):  # a dataset that accepts several layouts verifies its own files
        return mod.prepare(folder, allow_download)
    for fname, sha in mod.FILES.items():
        path = folder / fname
        if not path.exists():
            if not allow_download:
                raise HarnessError(f"data: {path} is missing; copy the {name} files into {folder} "
                                   f"(sources in harness/data/{name}.py), add --download to fetch and verify it, "
                                   f"or run without it: --synthetic {name}")
            download(mod.URLS[fname], path, sha, name)
        verify(path, sha)
    return folder
