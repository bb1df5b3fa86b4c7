"""The exact bytes and headers of a stream, read from a raw socket."""

from __future__ import annotations

import json

from harness.servers import Server
from tests.support import sse
from tests.support.rawhttp import fetch


def events_of(body: bytes) -> list[bytes]:
    """The data of each event, every byte well framed; chat and completions streams name no events."""
    events = sse.parse(body)
    assert all(event.name is None for event in events), events
    return [event.data.encode() for event in events]


def test_chat_stream_bytes_and_headers(server: Server) -> None:
    body = {
        "messages": [{"role": "user", "content": "Write a short poem."}],
        "max_tokens": 30,
        "stream": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    response = fetch(server.port, "POST", "/v1/chat/completions", body)
    assert response.status == 200
    assert response.header("content-type") == "text/event-stream; charset=utf-8"
    assert response.header("cache-control") == "no-cache"
    assert response.header("x-accel-buffering") == "no"
    assert response.header("content-length") is None
    assert response.header("transfer-encoding") == "chunked"
    assert b"\r" not in response.body
    events = events_of(response.body)
    assert events[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len({(c["id"], c["object"], c["created"], c["model"]) for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    reasons = [c["choices"][0]["finish_reason"] for c in chunks[:-1]]
    assert reasons[:-1] == [None] * (len(reasons) - 1) and reasons[-1] in ("stop", "length")
    assert chunks[-2]["choices"][0]["delta"] == {}  # the finish chunk carries no content
    assert all(c["usage"] is None for c in chunks[:-1])
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and 0 < usage["completion_tokens"] <= 30
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if reasons[-1] == "length":
        assert usage["completion_tokens"] == 30
    # Each event leaves in its own write: one HTTP chunk per frame, none buffered together.
    assert all(len(sse.frames(c)) == 1 for c in response.chunks)


def test_completion_stream_without_usage(server: Server) -> None:
    body = {"prompt": "Hello", "max_tokens": 5, "stream": True}
    response = fetch(server.port, "POST", "/v1/completions", body)
    events = events_of(response.body)
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == b"[DONE]" and all("usage" not in c for c in chunks)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"][0]["text"] == "" and chunks[-1]["choices"][0]["finish_reason"]


def test_non_ascii_text_is_escaped(server: Server) -> None:
    body = {
        "prompt": "Voici des emojis et accents: é, 日本, ",
        "max_tokens": 20,
        "stream": True,
        "temperature": 0,
    }
    response = fetch(server.port, "POST", "/v1/completions", body)
    assert response.body.isascii()
    events_of(response.body)
