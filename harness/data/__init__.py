"""Datasets: one module per dataset (`harness/data/<name>.py`), each a `harness.contracts.DatasetModule`

    FOLDER   the folder name under a data dir (laid out like ../shared/data)
    FILES    {file name: pinned sha256}
    URLS     {file name: download URL}
    load(folder: Path) -> dict          real data as numpy arrays
    synthetic(seed: int) -> dict        learnable stand-in of the same shapes

and optionally `prepare(folder, allow_download) -> Path` (a `contracts.SelfPreparingDataset`). Adding a dataset
means adding one such module; tests/test_contracts.py checks it. archive.py, fetch.py and fixtures.py are helpers.
prepare_data() verifies (and with --download fetches, from HARNESS_DATA_MIRROR where set: fetch.py) what a run's
cells read; a data folder this user cannot read or write is one line naming it and the fix.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, cast

from harness.contracts import DatasetModule, SelfPreparingDataset
from harness.data.fetch import data_folder_error, download, verify
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.config.cell import Cell
    from harness.config.context import CellContext


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
    """Return the dataset's verified folder under data_dir, downloading missing files if allowed (from
    HARNESS_DATA_MIRROR where set: harness/data/fetch.py). A folder or file this user cannot read or write is one line
    naming it and the fix."""
    mod = module(name)
    folder = Path(data_dir) / mod.FOLDER
    try:
        if isinstance(mod, SelfPreparingDataset):  # a dataset that accepts several layouts verifies its own files
            return mod.prepare(folder, allow_download)
        for fname, sha in mod.FILES.items():
            path = folder / fname
            if not path.exists():
                if not allow_download:
                    raise HarnessError(f"data: {path} is missing; copy the {name} files into {folder} "
                                       f"(sources in harness/data/{name}.py), add --download to fetch and verify it, "
                                       f"or run without it: --synthetic {name}")
                download(mod.URLS[fname], path, sha, name, data_dir=Path(data_dir))
            verify(path, sha)
    except OSError as e:  # Path.exists() and the like raise for a folder this user may not search
        raise data_folder_error(e, Path(data_dir), folder) from None
    return folder


def synthetic_datasets(cells: list[Cell], synthetic: str | None) -> set[str]:
    """--synthetic alone means every dataset; --synthetic cifar10,multi30k names some."""
    used = {c.dataset for c in cells if c.dataset}
    if not synthetic:
        return set()
    if synthetic == "all":
        return used
    names = {n.strip() for n in synthetic.split(",") if n.strip()}
    for n in sorted(names):
        module(n)  # a one-line error for a dataset that does not exist
    return names


def prepare_data(cells: list[Cell], data_dir: Path, allow_download: bool) -> dict[str, str]:
    """{dataset: its verified folder, absolute} for the datasets the cells read."""
    names = sorted({c.dataset for c in cells if c.dataset})
    folders = {}
    for n in names:
        folder = prepare(n, data_dir, allow_download)
        try:
            folders[n] = str(folder.resolve())
        except OSError as e:
            raise data_folder_error(e, Path(data_dir), folder) from None
    return folders
