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


def campaign(server: Server, seed: int, per_entry: int) -> None:
    streams = native_fuzz.Streams(server)
    streams.start()
    try:
        tally = native_fuzz.run(server, seed, per_entry)
    finally:
        streams.stop.set()
        streams.join(300)
    print("\n" + tally.summary())
    assert not tally.broken, tally.broken[:10]
    assert all(tally.sent[entry] == per_entry for entry in native_fuzz.ENTRY_POINTS), tally.sent
    assert not streams.broken and sum(streams.finished.values()) >= 2, (streams.broken, streams.finished)
    log = server.output()
    assert log.count("Booting worker") == 2, log[-3000:]  # none died and came back
    assert "SIGSEGV" not in log and "SIGABRT" not in log and "Traceback" not in log, log[-3000:]


def test_a_fixed_seed_campaign_over_every_entry_point(server: Server) -> None:
    campaign(server, seed=71, per_entry=15)


@pytest.mark.slow
def test_a_longer_campaign_over_every_entry_point(server: Server) -> None:
    campaign(server, seed=7100, per_entry=80)
