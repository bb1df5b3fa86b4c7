"""`make fuzz`'s campaign over the native boundary, as long as you like: NATIVE_FUZZ_PER_ENTRY inputs
(2,000 unless set) to each entry point where a client's bytes reach C or C++, seeded by FUZZ_SEED,
while other clients stream (tests/support/native_fuzz.py). Prints the inputs sent to each entry point
and the statuses answered; fails on a 500, a leak, a worker that died or a stream cut short."""

from __future__ import annotations

import os

import pytest

from app.settings.values import default_model_path
from tests.support import native_fuzz

pytestmark = pytest.mark.fuzz


def test_the_native_boundary_campaign() -> None:
    seed = int(os.environ.get("FUZZ_SEED", "71"))
    per_entry = int(os.environ.get("NATIVE_FUZZ_PER_ENTRY", "2000"))
    servers = native_fuzz.campaign_server(default_model_path())
    try:
        native_fuzz.campaign(next(servers), seed, per_entry)
    finally:
        servers.close()
