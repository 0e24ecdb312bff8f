"""The estimate held against wall times on the CPU (harness.estimate.heldout, docs/methodology/estimate.md): each
committed CPU run's cells estimated from the other profile's run, never from themselves, within the stated bounds;
a range contains what was measured, or it is not a range."""

from __future__ import annotations

import pytest

from harness.estimate import heldout


@pytest.fixture(scope="module", params=heldout.CASES, ids=lambda c: c.profile)
def compared(request):
    return heldout.compare(request.param)


def test_the_estimate_never_reads_the_run_it_is_held_against():
    assert all(c.reference != c.measured for c in heldout.CASES)


def test_every_cell_is_within_its_bound(compared):
    lo, hi = heldout.CELL_BOUND
    for r in compared.rows:
        assert r.measured_s is not None, f"{r.cell}: not in {compared.case.measured}"
        assert r.basis != "none", f"{r.cell}: nothing priced it"
        if r.open:
            assert r.low_s <= r.measured_s <= r.high_s, (r.cell, r.low_s, r.measured_s, r.high_s)
        else:
            assert lo <= r.ratio <= hi, (r.cell, r.estimate_s, r.measured_s)
        assert r.within()


def test_the_total_is_within_its_bound(compared):
    if compared.open:   # a range, and it contains the measured total
        assert compared.low_s <= compared.measured_s <= compared.high_s
    else:
        assert abs(compared.measured_s / compared.estimate_s - 1) <= heldout.TOTAL_BOUND
    assert compared.within()


def test_an_open_cell_is_one_whose_target_nothing_measured_reached():
    target = heldout.compare(heldout.CASES[0])
    opened = {r.cell.split("/")[1] for r in target.rows if r.open}
    assert opened == {"gru"}   # the quick run's GCN cells reached 70%; its GRU cells never reached BLEU 10
    assert all(r.high_s > r.low_s for r in target.rows if r.open)
