"""`harness estimate` for a booking says what it rests on: a range from the planned repeats to every comparison at
the profile's max_repeats, the cells a device cannot hold left out as the run leaves them out, per model how many
cells rest on a measured cell of the same model and precision (and on which device), and, on their own lines, what the
booking costs besides the cells (the image build, the downloads, MindSpore's first-run PTX JIT on a GPU)."""

from harness import cli, devicememory, estimate
from harness import matrix as matrix_mod


def _project(device, memory):
    m = matrix_mod.load()
    folders, _ = estimate.references("cuda", "accelerator")
    return estimate.project(m, "accelerator", "cuda", run=folders, device=device, devices=1, memory=memory)


def test_a_device_leaves_out_the_cells_it_cannot_hold_and_gives_a_range():
    big = _project("Tesla V100-SXM2-16GB", (1.0, "faked"))   # holds no BERT-base, even in micro-batches of 1
    v100 = _project("Tesla V100-SXM2-16GB", devicememory.table_gib("V100-16"))
    none = _project("Tesla V100-SXM2-16GB", (None, "not read"))
    assert big["skipped"] > none["skipped"]           # BERT's cells: the run skips them, so does the estimate
    assert big["total_s"] < none["total_s"]
    assert v100["skipped"] == none["skipped"]         # a V100-16 runs BERT-base in micro-batches (accumulation)
    assert big["upper_s"] > big["total_s"]            # the accelerator profile caps its repeats at 3, plans 2
    assert big["cap"] == matrix_mod.load().max_repeats("accelerator", None, None)


def test_the_printed_estimate_names_its_basis_and_what_is_not_in_it(capsys):
    assert cli.main(["estimate", "--device", "V100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "up to " in out[0] and "max_repeats (3)" in out[0]
    assert "    MindSpore's cells at PyTorch's times: no committed run measured MindSpore on this platform" in out
    bert = next(line for line in out if line.strip().startswith("bert ") and "rest on a measured cell" in line)
    assert "not on a Tesla V100-SXM2-32GB: scaled" in bert
    extra = [line.strip() for line in out if line.strip().startswith("not in the total: ")]
    assert any(line.startswith("not in the total: the image build: ") for line in extra)
    assert any("5.3 GB of wheels" in line for line in extra)
    assert any("MindSpore's first run on an H100" in line for line in extra)
