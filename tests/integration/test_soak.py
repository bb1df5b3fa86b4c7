"""The soak's short version: mixed traffic, hang-ups, bad requests and a key over its limit leak nothing."""

from __future__ import annotations

import pytest

from bench.soak import report, run


@pytest.mark.timeout(600)
def test_a_short_soak_leaks_nothing() -> None:
    soak = run(requests=160, clients=6, max_seconds=400)
    figures = report(soak)
    assert not soak.problems, figures  # no 5xx, no restart, no busy sequence, descriptors and greenlets back
    assert set(soak.statuses) <= {"200", "400", "429", "hung-up"}, figures
    # Every kind of traffic was there: answers, invalid requests, limits, hang-ups.
    assert all(soak.statuses[kind] > 0 for kind in ("200", "400", "429", "hung-up")), figures
    assert sum(soak.statuses.values()) == 160
    assert all(len(samples) >= 2 for samples in soak.samples.values())
