"""Where a prompt left the cache: X-Cache-Miss names the token and its message, the log both sides."""

from __future__ import annotations

import logging

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from tests.unit.conftest import FakeEngine, FakeTokenizer, make_config


class WordTokenizer(FakeTokenizer):
    """A token per word, each word its own id (so prompts differ where their words do)."""

    def chat_tokens(self, prompt: str) -> list[int]:
        return [sum(map(ord, word)) for word in prompt.split()]

    def piece(self, token: int) -> bytes:
        return f"<{token}>".encode()

    def pieces(self, tokens: list[int]) -> list[bytes]:
        return [self.piece(token) for token in tokens]


def conversation(system: str, *turns: str) -> dict:
    messages = [{"role": "system", "content": system}]
    for n, text in enumerate(turns):
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": text})
    return {"messages": messages}


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(tokenizer=WordTokenizer())


@pytest.fixture
def client(engine: FakeEngine) -> FlaskClient:
    app: Flask = create_app(make_config(LLM_N_CTX="512"), engine=engine)
    return app.test_client()


def test_a_prompt_that_leaves_a_cached_one_midway_says_where(
    client: FlaskClient, engine: FakeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    rules = " ".join(f"rule{n}" for n in range(40))  # a long system prompt: 40 words before the date
    monday, tuesday = (
        f"You are an agent. {rules} Today is Monday.",
        f"You are an agent. {rules} Today is Tuesday.",
    )
    earlier = conversation(monday, "Read the file please.", "Done.")
    engine.cached = [engine.tokenizer.chat_tokens(engine.tokenizer.render(earlier["messages"]))]
    later = conversation(tuesday, "Read the file please.", "Done.", "Next?")
    with caplog.at_level(logging.INFO, logger="app.api.generation.cache_miss"):
        response = client.post("/v1/chat/completions", json=later)
    assert response.headers["X-Cache-Miss"] == "token=47; message=0; role=system"
    (line,) = [r.getMessage() for r in caplog.records]
    assert "differs from token 47 (message 0, system)" in line
    changed = conversation(monday, "Read the other file.", "Done.", "Next?")
    assert client.post("/v1/chat/completions", json=changed).headers["X-Cache-Miss"] == (
        "token=51; message=1; role=user"
    )


def test_a_prompt_that_extends_the_cached_one_or_shares_only_an_opening_says_nothing(
    client: FlaskClient, engine: FakeEngine
) -> None:
    earlier = conversation("You are an agent.", "Hi", "Hello")
    engine.cached = [
        engine.tokenizer.chat_tokens(engine.tokenizer.render(earlier["messages"], generation_prompt=False))
    ]
    assert (
        "X-Cache-Miss"
        not in client.post(
            "/v1/chat/completions", json=conversation("You are an agent.", "Hi", "Hello", "Again")
        ).headers
    )
    assert (
        "X-Cache-Miss"
        not in client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Something else entirely"}]},
        ).headers
    )
