"""The fuzz campaign over the native boundary on the real server (tests/support/native_fuzz.py): a fixed
seed here, a longer campaign in the slow tier, `make fuzz` as long as you like. Every entry point where
a client's bytes reach C or C++ (grammars, regexes, Lark, schemas, images, audio, the tokenizer) gets
generated hostile inputs while other clients stream; no answer is a 500 or shows the server's insides,
no worker dies or boots again, every stream beside it ends whole."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.settings.values import default_model_path
from harness.servers import Server
from tests.support import native_fuzz


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    yield from native_fuzz.campaign_server(default_model_path())


# Bounded by their input counts, not by time: the limits only keep a stuck run from holding CI.
@pytest.mark.timeout(900)
def test_a_fixed_seed_campaign_over_every_entry_point(server: Server) -> None:
    native_fuzz.campaign(server, seed=71, per_entry=10)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_longer_campaign_over_every_entry_point(server: Server) -> None:
    native_fuzz.campaign(server, seed=7100, per_entry=25)
