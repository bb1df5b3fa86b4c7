"""Sealed reasoning: a blob opens only for the key it was sealed for, and the server's key file is private
from its first byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from flask import Flask, g

from app import create_app
from app.api.http import sealing
from app.settings.keys import ApiKey
from tests.unit.conftest import FakeEngine, make_config


def _sealer(app: Flask, key: ApiKey | None) -> sealing.Sealer:
    with app.test_request_context("/v1/responses"):
        if key is not None:
            g.api_key = key
        return sealing.current()


def test_a_blob_sealed_for_one_key_opens_for_no_other(engine: FakeEngine, tmp_path: Path) -> None:
    config = make_config(LLM_API_KEYS="alice:sk-a,bob:sk-b", LLM_DATA_DIR=str(tmp_path))
    app = create_app(config, engine=engine)
    alice, bob = config.api_keys
    blob = _sealer(app, alice).seal("The figure is 41.")
    assert _sealer(app, alice).unseal(blob) == "The figure is 41."
    assert _sealer(app, bob).unseal(blob) is None  # replayed into Bob's prompt: no reasoning at all
    assert _sealer(app, None).unseal(blob) is None


def test_without_keys_the_servers_key_alone_seals(engine: FakeEngine, tmp_path: Path) -> None:
    app = create_app(make_config(LLM_REASONING_KEY="a shared secret, long enough"), engine=engine)
    blob = _sealer(app, None).seal("thoughts")
    assert (
        sealing.Sealer("a shared secret, long enough").unseal(blob) == "thoughts"
    )  # as blobs sealed before keys


def test_the_key_file_is_made_private(tmp_path: Path) -> None:
    before = os.umask(0o022)
    try:
        secret = sealing._key_file.__wrapped__(str(tmp_path / "data"))
    finally:
        os.umask(before)
    path = tmp_path / "data" / "reasoning.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == secret
    assert [p.name for p in path.parent.iterdir()] == ["reasoning.key"]  # no partial file left
