"""The check's host rows beside disk: memory against two processes of the committed CPU run's largest cell, and the
datasets already in the data folder (the rest downloaded on the first run: a note, not a failure)."""

from harness.preflight import NOTE, PASS, checks_host


def test_memory_against_the_committed_runs_largest_cell(tmp_path):
    largest = checks_host._largest_rss()
    assert largest is not None and largest[0] > 0.5, "docs/runs/cpu-quick records each cell's peak RSS"
    roomy, tight = tmp_path / "roomy", tmp_path / "tight"
    roomy.write_text(f"MemTotal:       {int(3 * largest[0] * 2**20)} kB\n")
    tight.write_text(f"MemTotal:       {int(1.5 * largest[0] * 2**20)} kB\n")
    assert checks_host.memory_row(str(roomy)).verdict == PASS
    row = checks_host.memory_row(str(tight))
    assert row.verdict == NOTE and row.ok() and "killed for memory" in row.note
    assert largest[1] in row.needed


def test_datasets_present_pass_and_missing_ones_are_fetched_on_the_first_run(tmp_path):
    folders = checks_host.dataset_folders()
    assert set(folders) == {"cifar10", "cora", "imdb", "multi30k"}
    for name, folder in folders.items():
        if name != "cifar10":
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "file").write_text("x")
    row = checks_host.data_row({"HARNESS_DATA_DIR": str(tmp_path)})
    assert row.verdict == NOTE and row.found.endswith("not yet: cifar10") and "pinned sha256" in row.note
    (tmp_path / folders["cifar10"]).mkdir()
    (tmp_path / folders["cifar10"] / "f").write_text("x")
    assert checks_host.data_row({"HARNESS_DATA_DIR": str(tmp_path)}).verdict == PASS
