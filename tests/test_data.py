import errno
import hashlib
import io
import os
import tarfile

import numpy as np
import pytest

from harness import data
from harness.data import cora
from harness.errors import HarnessError


def _copy_cora(src, dst):
    folder = dst / cora.FOLDER
    folder.mkdir(parents=True)
    for name in cora.FILES:
        (folder / name).write_bytes((src / cora.FOLDER / name).read_bytes())
    return folder


def test_real_cora_verifies_and_loads_with_the_planetoid_split(shared_data):
    folder = data.prepare("cora", shared_data, allow_download=False)
    d = cora.load(folder)
    assert d["features"].shape == (2708, 1433) and d["num_classes"] == 7
    assert (len(d["train_idx"]), len(d["val_idx"]), len(d["test_idx"])) == (140, 500, 1000)
    assert len(d["adj_values"]) == 2708 + 2 * 5278  # self-loops + both directions of each undirected edge
    assert np.bincount(d["labels"]).tolist() == [351, 217, 418, 818, 426, 298, 180]
    np.testing.assert_allclose(d["features"].sum(1), 1.0, rtol=1e-5)


def test_checksum_mismatch_names_file_expected_and_found(shared_data, tmp_path):
    folder = _copy_cora(shared_data, tmp_path)
    with open(folder / "ind.cora.graph", "ab") as f:
        f.write(b"x")
    with pytest.raises(HarnessError) as e:
        data.prepare("cora", tmp_path, allow_download=False)
    msg = str(e.value)
    assert "ind.cora.graph" in msg and cora.FILES["ind.cora.graph"] in msg and "found" in msg
    assert "\n" not in msg


def test_missing_file_names_it_and_the_fix(tmp_path):
    (tmp_path / cora.FOLDER).mkdir()
    with pytest.raises(HarnessError, match=r"ind\.cora\.x is missing.*--download"):
        data.prepare("cora", tmp_path, allow_download=False)


def test_synthetic_cora_has_the_real_shapes_and_is_deterministic():
    a, b = cora.synthetic(7), cora.synthetic(7)
    assert a["features"].shape == (2708, 1433) and a["num_classes"] == 7
    assert (len(a["train_idx"]), len(a["val_idx"]), len(a["test_idx"])) == (140, 500, 1000)
    assert not set(a["train_idx"]) & set(a["val_idx"]) and not set(a["val_idx"]) & set(a["test_idx"])
    np.testing.assert_array_equal(a["adj_indices"], b["adj_indices"])


def test_unknown_dataset_is_a_clear_error():
    with pytest.raises(HarnessError, match="harness/data/imagenet.py"):
        data.module("imagenet")


def test_a_download_gets_the_mode_open_gives_under_the_umask(tmp_path, monkeypatch):
    """Not mkstemp's 0600: a data folder one user filled is readable by the others the umask lets read it."""
    from harness.data import fetch

    served = tmp_path / "mirror" / cora.FOLDER
    served.mkdir(parents=True)
    (served / "ind.cora.x").write_bytes(b"x" * 10)
    monkeypatch.setenv(fetch.MIRROR_ENV, (tmp_path / "mirror").as_uri())
    dest = tmp_path / "data" / cora.FOLDER / "ind.cora.x"
    old = os.umask(0o027)
    try:
        fetch.download(cora.URLS["ind.cora.x"], dest, hashlib.sha256(b"x" * 10).hexdigest(), "cora")
    finally:
        os.umask(old)
    assert dest.stat().st_mode & 0o777 == 0o640 and dest.parent.stat().st_mode & 0o777 == 0o750
    assert [p.name for p in dest.parent.iterdir()] == ["ind.cora.x"]


def test_extracted_files_get_normal_modes_whatever_the_tarball_says(tmp_path):
    from harness.data import archive, fetch

    tarball = tmp_path / "t.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for name, mode, kind in (("top", 0o700, tarfile.DIRTYPE), ("top/a", 0o600, tarfile.REGTYPE)):
            info = tarfile.TarInfo(name)
            info.mode, info.type = mode, kind
            tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    (tmp_path / "out").mkdir()
    assert archive.extract(tarball, tmp_path / "out", "top") == ["top/a"]
    assert (tmp_path / "out" / "top" / "a").stat().st_mode & 0o777 == fetch.normal_mode(is_dir=False)
    assert (tmp_path / "out" / "top").stat().st_mode & 0o777 == fetch.normal_mode(is_dir=True)


def test_data_folder_errors_are_one_line_naming_the_place_and_the_fix(tmp_path):
    from harness.data import fetch

    data_dir = tmp_path / "data"
    full = fetch.data_folder_error(OSError(errno.ENOSPC, "No space left on device"), data_dir, data_dir / "x" / "f")
    assert str(full) == (f"data: no space left to write {data_dir / 'x' / 'f'} (No space left on device): free space "
                         f"there (df -h {data_dir / 'x'}) or pass --data-dir FOLDER on another disk")
    ro = fetch.data_folder_error(OSError(errno.EROFS, "Read-only file system", str(data_dir / "x")), data_dir)
    assert str(ro).startswith(f"data: {data_dir / 'x'} is on a read-only file system: pass --data-dir FOLDER on a "
                              f"writable disk")
    if os.geteuid() == 0:   # root reads and writes anything: a folder someone else owns is one root cannot be denied
        os.chown(tmp_path, 65534, 65534)
        try:
            denied = fetch.data_folder_error(PermissionError(errno.EACCES, "Permission denied", str(data_dir)),
                                             data_dir)
        finally:
            os.chown(tmp_path, 0, 0)
        assert str(denied) == (f"data: {tmp_path} is owned by nobody and not writable by you (root): pass --data-dir "
                               f"FOLDER you own, or have nobody run `mkdir -p {data_dir} && chown root {data_dir}`")
    for e in (full, ro):
        assert "\n" not in str(e)
