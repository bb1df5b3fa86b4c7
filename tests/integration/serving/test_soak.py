"""The soak's short version, run as a user runs it: mixed traffic, hang-ups, bad requests and a key over
its limit leak nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.servers import ROOT

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_a_short_soak_leaks_nothing() -> None:
    command = [
        sys.executable,
        "-m",
        "bench.soak",
        "--requests",
        "160",
        "--clients",
        "6",
        "--max-seconds",
        "400",
        "--json",
    ]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=580)
    figures = json.loads(ran.stdout)
    # No 5xx, no restart, no busy sequence, descriptors and greenlets back to where they were at rest.
    assert not figures["problems"] and ran.returncode == 0, (figures, ran.stderr[-4000:])
    statuses = figures["statuses"]
    assert set(statuses) <= {"200", "400", "429", "hung-up"}, figures
    # Every kind of traffic was there: answers, invalid requests, limits, hang-ups.
    assert all(statuses[kind] > 0 for kind in ("200", "400", "429", "hung-up")), figures
    assert sum(statuses.values()) == 160
    assert all(worker["samples"] >= 2 for worker in figures["workers (start, end, max)"].values())
