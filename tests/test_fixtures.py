"""Safe tarball extraction on every Python 3.11 (harness/data/archive.py), the format-faithful dataset fixtures
(harness/data/fixtures.py) and the loader check run inside every image (tools/check_datasets.py)."""

import io
import os
import pickle
import pickletools
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from harness.data import archive, cifar10, cora, fixtures, multi30k
from harness.errors import HarnessError
from tests.helpers import REPO

TOP = cifar10.MEMBER_DIR
REAL_EXTRACTALL = tarfile.TarFile.extractall


@pytest.fixture(params=["data_filter", "no_data_filter"])
def python(request, monkeypatch):
    """Each test runs as on Python >= 3.11.4 (tarfile's data filter) and as on Debian bookworm's 3.11.2 (none: there
    extractall() takes no `filter` argument; passing one raises TypeError, as it does there)."""
    if request.param == "data_filter":
        if not hasattr(tarfile, "data_filter"):
            pytest.skip(f"Python {sys.version.split()[0]} has no tarfile.data_filter (Debian bookworm's 3.11.2)")
        return request.param
    monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def extractall_3_11_2(self, path=".", members=None, *, numeric_owner=False, **kwargs):
        if kwargs:
            raise TypeError(f"TarFile.extractall() got an unexpected keyword argument '{next(iter(kwargs))}'")
        return REAL_EXTRACTALL(self, path, members, numeric_owner=numeric_owner)

    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall_3_11_2)
    return request.param


def _tarball(path, entries):
    """entries: (TarInfo fields, content) pairs."""
    with tarfile.open(path, "w:gz") as tar:
        for fields, content in entries:
            info = tarfile.TarInfo(fields.pop("name"))
            for k, v in fields.items():
                setattr(info, k, v)
            if content is not None:
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return path


def test_the_regular_files_of_the_folder_are_extracted_and_nothing_else(tmp_path, python):
    src = _tarball(tmp_path / "a.tar.gz", [({"name": TOP, "type": tarfile.DIRTYPE}, None),
                                            ({"name": f"{TOP}/one"}, b"1"), ({"name": f"{TOP}/sub/two"}, b"22"),
                                            ({"name": "elsewhere/three"}, b"333")])
    dest = tmp_path / "out"
    dest.mkdir()
    assert archive.extract(src, dest, TOP) == [f"{TOP}/one", f"{TOP}/sub/two"]
    assert (dest / TOP / "one").read_bytes() == b"1" and (dest / TOP / "sub" / "two").read_bytes() == b"22"
    assert not (dest / "elsewhere").exists()
    assert archive.method().startswith("tarfile's data filter" if python == "data_filter" else "the member check")


@pytest.mark.parametrize("member, says", [
    ({"name": f"{TOP}/data_batch_1", "type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, "is a symbolic link"),
    ({"name": f"{TOP}/data_batch_1", "type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}, "is a hard link"),
    ({"name": f"{TOP}/null", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, "is a device"),
    ({"name": f"{TOP}/pipe", "type": tarfile.FIFOTYPE}, "is a FIFO"),
    ({"name": TOP, "type": tarfile.SYMTYPE, "linkname": "/tmp"}, "is a symbolic link"),
    ({"name": "../escaped"}, "leaves the folder"),
    ({"name": f"{TOP}/../../escaped"}, "leaves the folder"),
    ({"name": "/tmp/escaped-absolute"}, "leaves the folder"),
])
def test_a_malicious_member_is_refused_in_one_line_and_nothing_is_written(tmp_path, python, member, says):
    content = b"x" if member.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else None
    src = _tarball(tmp_path / cifar10.TARBALL, [({"name": f"{TOP}/ok"}, b"fine"), (dict(member), content)])
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(HarnessError, match=says) as e:
        archive.extract(src, dest, TOP)
    assert "\n" not in str(e.value) and member["name"] in str(e.value) and "fetch it again" in str(e.value)
    assert list(dest.iterdir()) == [] and not (tmp_path / "escaped").exists()
    assert not os.path.exists("/tmp/escaped-absolute")


def test_cifar10_load_refuses_a_tarball_with_a_link_and_leaves_no_folder(tmp_path, python):
    fixtures.cifar10(tmp_path, np.random.RandomState(0), n=2)
    with tarfile.open(tmp_path / cifar10.TARBALL) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    link = tarfile.TarInfo(f"{TOP}/evil")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    with tarfile.open(tmp_path / cifar10.TARBALL, "w:gz") as tar:
        for m, content in [*members, (link, None)]:
            tar.addfile(m, io.BytesIO(content) if content is not None else None)
    with pytest.raises(HarnessError, match=rf"{TOP}/evil' is a symbolic link"):
        cifar10.load(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [cifar10.TARBALL]


def test_cifar10_without_a_batch_or_not_a_tarball_is_one_line(tmp_path, python):
    _tarball(tmp_path / cifar10.TARBALL, [({"name": f"{TOP}/data_batch_1"}, b"x")])
    with pytest.raises(HarnessError, match=f"has no {TOP}/data_batch_2; it is not the official"):
        cifar10.load(tmp_path)
    (tmp_path / cifar10.TARBALL).write_bytes(b"not a tarball")
    with pytest.raises(HarnessError, match="could not read"):
        cifar10.load(tmp_path)


def test_cifar10_loads_from_a_read_only_folder_without_writing_there(tmp_path, python, monkeypatch):
    fx = fixtures.cifar10(tmp_path, np.random.RandomState(1), n=4)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if (mode & os.W_OK and str(p) == str(tmp_path))
                        else real_access(p, mode))  # as a `:ro` mount (root would write anyway)
    d = cifar10.load(tmp_path)
    np.testing.assert_array_equal(d["test_x"], fx.expected["test_x"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [cifar10.TARBALL]


def test_py2_pickles_reproduce_the_real_planetoid_files(shared_data):
    """The emitter writes what Python 2's cPickle wrote: byte for byte, once the memo entries nothing refers back to
    are dropped (pickletools.optimize)."""
    folder = shared_data / cora.FOLDER
    for name in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
        raw = (folder / f"ind.cora.{name}").read_bytes()
        obj = cora._Unpickler(io.BytesIO(raw), encoding="latin1").load()
        if hasattr(obj, "indptr"):
            obj = fixtures.Csr(obj.shape, obj.indptr, obj.indices, obj.data)
        assert pickletools.optimize(fixtures.py2_pickle(obj)) == pickletools.optimize(raw), name


def test_the_cifar10_batches_are_python2_pickles():
    blob = fixtures.py2_pickle({"batch_label": "testing batch 1 of 1", "data": np.zeros((1, 3072), np.uint8)})
    ops = [op.name for op, _, _ in pickletools.genops(blob)]
    assert "SHORT_BINSTRING" in ops and "BINUNICODE" not in ops and "SHORT_BINBYTES" not in ops
    assert b"numpy.core.multiarray\n_reconstruct" in blob
    d = pickle.loads(blob, encoding="bytes")  # noqa: S301 (written just above)
    assert d[b"batch_label"] == b"testing batch 1 of 1" and d[b"data"].dtype == np.uint8


def test_the_cora_fixture_loads_with_the_planetoid_split(tmp_path):
    fx = fixtures.cora(tmp_path, np.random.RandomState(2))
    d = cora.load(tmp_path)
    e = fx.expected
    np.testing.assert_allclose(d["features"], e["features"], rtol=1e-6)
    for key in ("labels", "train_idx", "val_idx", "test_idx"):
        np.testing.assert_array_equal(d[key], e[key])
    assert len(d["adj_values"]) == e["nnz"] and d["num_nodes"] == e["num_nodes"]
    index = [int(v) for v in (tmp_path / "ind.cora.test.index").read_text().split()]
    assert index != sorted(index) and sorted(index) == d["test_idx"].tolist()  # stored unsorted, as the real file


def test_the_multi30k_fixture_loads(tmp_path):
    fx = fixtures.multi30k(tmp_path, np.random.RandomState(3), {"train": 5, "val": 2, "test": 2})
    assert multi30k.load(tmp_path) == fx.expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{s}.{lang}.gz" for s in multi30k.SPLITS.values()
                                                                for lang in ("en", "fr", "de"))
    assert any(not line.isascii() for s in fx.expected.values() for line in s["fr"])


def test_pinned_replaces_the_pins_only_within_the_block():
    before = dict(multi30k.FILES)
    with fixtures.pinned(multi30k, {"train.en.gz": "1" * 64}):
        assert multi30k.FILES["train.en.gz"] == "1" * 64 and multi30k.FILES["val.en.gz"] == before["val.en.gz"]
    assert multi30k.FILES == before


def _check(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(REPO / "tools" / "check_datasets.py"), *args], env=env,
                          capture_output=True, text=True, timeout=600)


def test_check_datasets_loads_every_dataset():
    r = _check()
    assert r.returncode == 0, r.stderr
    for name in ("cifar10", "cora", "multi30k", "imdb"):
        assert f"check_datasets: ok  {name}" in r.stdout
    assert "train 25000 (12500 pos), test 25000 (12500 pos)" in r.stdout  # the sizes load() checks
    assert f"Python {sys.version.split()[0]}" in r.stdout and archive.method() in r.stdout


def test_check_datasets_bad_arguments_are_one_line_and_exit_2():
    for args in (["--only", "mnist"], ["--fast"]):
        r = _check(*args)
        assert r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr


def test_check_datasets_names_the_dataset_whose_loader_is_wrong(monkeypatch, capsys):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import check_datasets
    finally:
        sys.path.remove(str(REPO / "tools"))
    real = multi30k.load
    monkeypatch.setattr(multi30k, "load", lambda folder: {**real(folder), "val": {"en": [], "fr": []}})
    assert check_datasets.main(["--only", "cora,multi30k"]) == 1
    err = capsys.readouterr().err
    assert "check_datasets: FAILED: multi30k: the sentences load() returned differ" in err and "cora" not in err
