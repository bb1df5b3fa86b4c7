"""A streamed request waiting for its on-demand model: keep-alives while it loads, then the holder's."""

from __future__ import annotations

from typing import Any, cast

import gevent
import pytest

from app.api.routing import load_stream
from app.serving import relay
from tests.unit.settings.test_config import settings


class Upstream:
    """What the worker holding the model answers: a status, then its body a piece at a time."""

    def __init__(self, status: int, *pieces: bytes) -> None:
        self.status, self.pieces = status, list(pieces)

    def read1(self, size: int) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""

    def read(self) -> bytes:
        return b"".join(self.pieces)


class Connection:
    sock = None
    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def relayed(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The request stands for itself by its path; relaying is patched in by `run`."""
    monkeypatch.setattr(relay, "forward_of", lambda path: relay._Forward("POST", path, b"{}", {}))
    monkeypatch.setattr(load_stream, "POLL", 0.01)
    return monkeypatch


def run(
    relayed: pytest.MonkeyPatch,
    path: str,
    ready_after: int,
    upstream: Upstream | None,
    outcome: str | None = None,
    **env: str,
) -> list[bytes]:
    """The events a request to `path` gets when a holder is ready after `ready_after` polls (its answer:
    `upstream`; None: it cannot be reached), the load having ended saying `outcome`."""
    polls = iter(range(1000))
    loading = gevent.spawn(lambda: outcome)
    loading.join()

    def holder_seat() -> tuple[int | None, float]:
        return (3 if next(polls) >= ready_after else None), load_stream.POLL

    def open_forward(forward: object, config: object, table: object, seat: int) -> object:
        assert seat == 3
        return None if upstream is None else (Connection(), upstream)

    relayed.setattr(relay, "open_forward", open_forward)
    config = settings(LLM_QUEUE_TIMEOUT="30", **env)
    table = object()  # only handed on to open_forward, faked here
    ended: list[bool] = []
    # A path for a request, a stand-in table: what keep_alive_until_loaded hands on, faked here.
    request, stand_in = cast(Any, path), cast(Any, table)
    response = load_stream.keep_alive_until_loaded(
        request, config, stand_in, holder_seat, loading, lambda: ended.append(True)
    )
    assert response.mimetype == "text/event-stream" and response.status_code == 200
    pieces = [piece if isinstance(piece, bytes) else piece.encode() for piece in response.response if piece]
    assert ended == [True]  # told once that the wait is over (the hang-up watch stops)
    return pieces


def test_keep_alives_while_the_model_loads_then_the_holders_events_unchanged(
    relayed: pytest.MonkeyPatch,
) -> None:
    holder = Upstream(200, b'data: {"a":1}\n\n', b"data: [DONE]\n\n")
    events = run(relayed, "/v1/chat/completions", 5, holder, LLM_SSE_KEEPALIVE="0.001")
    assert events == [b": keep-alive\n\n"] * 5 + [b'data: {"a":1}\n\n', b"data: [DONE]\n\n"]


def test_no_keep_alives_when_they_are_off(relayed: pytest.MonkeyPatch) -> None:
    events = run(relayed, "/v1/completions", 5, Upstream(200, b"data: [DONE]\n\n"), LLM_SSE_KEEPALIVE="0")
    assert events == [b"data: [DONE]\n\n"]


def test_a_load_that_fails_after_the_200_is_one_error_event_in_the_routes_protocol(
    relayed: pytest.MonkeyPatch,
) -> None:
    (openai_style,) = run(relayed, "/v1/chat/completions", 1000, None, outcome="llama.cpp refused it")
    assert openai_style.startswith(b'data: {"error":{"message":"llama.cpp refused it"')
    (anthropic_style,) = run(relayed, "/v1/messages", 1000, None, outcome="llama.cpp refused it")
    assert anthropic_style.startswith(b'event: error\ndata: {"type":"error","error":{"type":"api_error"')
    assert b"llama.cpp refused it" in anthropic_style


def test_a_holder_that_refuses_is_an_error_event_with_its_message(relayed: pytest.MonkeyPatch) -> None:
    refused = Upstream(429, b'{"error": {"message": "queue full", "type": "rate_limit_error"}}')
    (event,) = run(relayed, "/v1/chat/completions", 0, refused)
    assert b'"message":"queue full"' in event
