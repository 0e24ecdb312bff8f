"""The check's host rows beside disk: memory against two processes of the committed CPU run's largest cell, and the
datasets already in the data folder (the rest downloaded on the first run: a note, not a failure). host.py collects
the facts (/proc/meminfo, the expected run's cells, the data folder); the rows read only those."""

from harness.preflight import NOTE, PASS, checks_host
from harness.preflight import host as probe
from harness.preflight.host import Host


def test_memory_against_the_committed_runs_largest_cell(tmp_path):
    run = probe.expected_run_facts()
    largest = run["largest_rss"]
    assert largest is not None and largest["gib"] > 0.5, "docs/runs/cpu-quick records each cell's peak RSS"
    roomy, tight = tmp_path / "roomy", tmp_path / "tight"
    roomy.write_text(f"MemTotal:       {int(3 * largest['gib'] * 2**20)} kB\n")
    tight.write_text(f"MemTotal:       {int(1.5 * largest['gib'] * 2**20)} kB\n")

    def memory_row(meminfo):
        return checks_host.memory_row(Host("cpu", facts={"memory_gib": probe.mem_total_gib(str(meminfo)),
                                                         "expected_run": run}))

    assert memory_row(roomy).verdict == PASS
    row = memory_row(tight)
    assert row.verdict == NOTE and row.ok() and "killed for memory" in row.note
    assert largest["cell"] in row.needed
    assert memory_row(tmp_path / "absent").found == "not read"


def test_datasets_present_pass_and_missing_ones_are_fetched_on_the_first_run(tmp_path):
    folders = probe.dataset_folders()
    assert set(folders) == {"cifar10", "cora", "imdb", "multi30k"}
    for name, folder in folders.items():
        if name != "cifar10":
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "file").write_text("x")

    def data_row():
        facts = {"datasets": probe.dataset_facts({"HARNESS_DATA_DIR": str(tmp_path)})}
        return checks_host.data_row(Host("cpu", facts=facts))

    row = data_row()
    assert row.verdict == NOTE and row.found.endswith("not yet: cifar10") and "pinned sha256" in row.note
    (tmp_path / folders["cifar10"]).mkdir()
    (tmp_path / folders["cifar10"] / "f").write_text("x")
    assert data_row().verdict == PASS


def test_a_host_recorded_without_these_facts_has_neither_row():
    assert checks_host.rows(Host("cuda", facts={"mode": "container"})) == []
