"""A vocabulary with odd tokens, generated: every family's answers whole, well framed, and the worker alive.

A GGUF may hold tokens no tokenizer would make: bytes that are not UTF-8, an empty one, a
100,000-character one, characters a byte-level vocabulary cannot spell, a terminal
escape, a surrogate, an overlong encoding, an emoji cut between two tokens, markup as a
normal token, a control token (tests/support/tiny_models.py: `odd-vocabulary`, which
answers every prompt with exactly those tokens). The pieces are llama.cpp's own (each
token's `bytes` in the log-probabilities); the text every route gives is those bytes
decoded once, whatever the family, streamed or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from harness.servers import Server, serving_models
from tests.support import sse, tiny_models

MESSAGES = [{"role": "user", "content": "Say something odd: € \u0000 \u001b[31m 😀"}]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    model = {"id": "odd", "path": str(tiny_models.path("odd-vocabulary")), "workers": 1, "n_ctx": 2048}
    with serving_models([model]) as server:
        yield server


@pytest.fixture(scope="module")
def answer(server: Server) -> dict:
    body = {"model": "odd", "messages": MESSAGES, "logprobs": True, "temperature": 0}
    response = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text[:2000]
    return response.json()


def pid(server: Server) -> int:
    (worker,) = httpx.get(server.url + "/health/workers", timeout=10).json()["data"]
    return worker["pid"]


def test_the_answer_is_llama_cpps_pieces_decoded_once_the_long_token_whole(answer: dict) -> None:
    choice = answer["choices"][0]
    tokens = choice["logprobs"]["content"]
    assert len(tokens) == answer["usage"]["completion_tokens"] == len(tiny_models.ODD_TOKENS) + 1
    assert choice["finish_reason"] == "stop"
    pieces = b"".join(bytes(token["bytes"] or []) for token in tokens)
    assert choice["message"]["content"] == pieces.decode("utf-8", errors="replace")
    text = choice["message"]["content"]
    assert "x" * 100_000 in text  # longer than a piece buffer: asked for again at its size
    assert "[EMPTY_" in text and "[UNK_BYTE_0xe282ac€]" in text  # llama.cpp's names for what it cannot spell
    assert "end😀ok" in text  # the emoji's bytes joined across the two tokens
    assert text.endswith('"}</tool_call>\n')  # and the control token after it writes nothing


STREAMS = [
    ("/v1/chat/completions", {"messages": MESSAGES}),
    ("/v1/messages", {"messages": MESSAGES, "max_tokens": 64}),
    ("/v1/responses", {"input": MESSAGES}),
    ("/api/chat", {"messages": MESSAGES}),
]


def streamed_text(path: str, events: bytes) -> str:
    if path == "/api/chat":  # Ollama's NDJSON: one JSON object per line
        return "".join(json.loads(line)["message"]["content"] for line in events.splitlines())
    if path == "/v1/chat/completions":
        return "".join(
            p["choices"][0]["delta"].get("content") or "" for p in sse.payloads(events) if p["choices"]
        )
    if path == "/v1/messages":
        return "".join(
            e["delta"].get("text", "") for name, e in sse.named(events) if name == "content_block_delta"
        )
    return "".join(e["delta"] for name, e in sse.named(events) if name == "response.output_text.delta")


@pytest.mark.parametrize(("path", "body"), STREAMS, ids=[path for path, _ in STREAMS])
def test_every_familys_stream_is_well_framed_and_carries_the_same_text(
    server: Server, answer: dict, path: str, body: dict
) -> None:
    worker = pid(server)
    with httpx.stream(
        "POST", server.url + path, json={"model": "odd", "stream": True, **body}, timeout=60
    ) as got:
        assert got.status_code == 200
        events = got.read()
    assert streamed_text(path, events) == answer["choices"][0]["message"]["content"]
    assert pid(server) == worker


def test_a_request_with_tools_reads_the_markup_token_as_text_not_a_call(server: Server) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    body = {"model": "odd", "messages": MESSAGES, "tools": [tool]}
    response = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text[:2000]
    message = response.json()["choices"][0]["message"]
    assert not message.get("tool_calls") and "end😀ok" in message["content"]


def test_tokenize_and_detokenize_take_the_odd_tokens(server: Server, answer: dict) -> None:
    text = answer["choices"][0]["message"]["content"]
    tokens = httpx.post(server.url + "/tokenize", json={"content": text, "with_pieces": True}, timeout=60)
    assert tokens.status_code == 200 and tokens.json()["tokens"]
    completion = httpx.post(
        server.url + "/completion", json={"prompt": "hi", "return_tokens": True, "temperature": 0}, timeout=60
    ).json()
    assert len(completion["tokens"]) == len(tiny_models.ODD_TOKENS) + 1
    back = httpx.post(server.url + "/detokenize", json={"tokens": completion["tokens"]}, timeout=60).json()
    # /detokenize writes control tokens out, as llama-server does.
    assert back["content"] == completion["content"] + tiny_models.ODD_CONTROL
