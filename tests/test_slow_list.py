"""tests/slow.txt, the tests `pytest -m "not slow"` leaves out (tests/conftest.py marks them): every entry still names a
test or a test file of the suite, so a renamed or removed test cannot leave the list naming nothing."""

import subprocess
import sys

from tests.helpers import COLLECTED, REPO, SLOW_LIST, is_slow, slow_entries


def test_the_slow_list_says_how_it_was_measured_and_names_each_test_once():
    header = [line for line in SLOW_LIST.read_text().splitlines() if line.startswith("#")]
    assert any("--durations" in line for line in header), "the header says how the durations were measured"
    entries = slow_entries()
    assert entries and len(entries) == len(set(entries)), [e for e in entries if entries.count(e) > 1]
    covered = [e for e in entries if any(o != e and is_slow(e, {o}) for o in entries)]
    assert not covered, f"entries a wider entry already names: {covered}"


def test_every_entry_of_the_slow_list_is_a_test_that_exists(pytestconfig):
    """Each entry (a node id, a parametrized test's name without its cases, a file) names a test this session
    collected; the entries in files it did not collect, pytest collects on their own, refusing any it cannot find."""
    collected = pytestconfig.stash.get(COLLECTED, [])
    files = {nodeid.split("::", 1)[0] for nodeid in collected}
    here = [e for e in slow_entries() if e.split("::", 1)[0] in files]
    assert [e for e in here if not any(is_slow(nodeid, {e}) for nodeid in collected)] == []
    elsewhere = [e for e in slow_entries() if e not in here]
    if elsewhere:
        p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "-p", "no:xdist", *elsewhere], capture_output=True, text=True, cwd=REPO, timeout=600)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
