"""The master's check of the LLM_MODELS entries, run as `python -m` in a child from the checkout."""

from __future__ import annotations

import json

import pytest

from app.engine.gguf import model_check
from app.settings.config import Config
from tests.unit.conftest import FAKE_MODEL


def test_the_child_check_runs_from_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    # An embedding entry with no pooling needs the child; the unit tests' stand-in GGUF cannot be
    # read by llama.cpp, so the child says nothing and exits 0, unless it cannot even start (as
    # when it is run from a folder where `app` is not found: exit 1, then the master's SystemExit).
    entry = [{"id": "e", "path": FAKE_MODEL, "embedding": True}]
    monkeypatch.setenv("LLM_MODELS", json.dumps(entry))
    config = Config.from_env()
    assert model_check.needs_check(config)
    model_check.exit_unless_servable(config)
