"""Server-Sent-Event framing, kept to exactly what every OpenAI client parses."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Response

# `\n` line ends only, no `id:`/`retry:` fields: openai-python breaks on `id:` followed
# by comments, and one server's `\r\n` broke a client. Chat and completions streams name
# no events either; the Responses and Anthropic streams name every event, as theirs do.
DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive\n\n"

HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: pass each event on at once
}


def event(payload: dict[str, Any]) -> bytes:
    """One `data:` event; ASCII-only JSON, as some parsers split lines on U+2028."""
    return b"data: " + json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode() + b"\n\n"


def named_event(name: str, payload: dict[str, Any]) -> bytes:
    """An `event: <name>` line, then the `data:` line of `payload`."""
    return b"event: " + name.encode() + b"\n" + event(payload)


def stream_response(events: Iterable[bytes]) -> Response:
    """A streaming response whose headers leave before the first event is produced."""
    response = Response(_headers_first(events), mimetype="text/event-stream")
    response.headers.update(HEADERS)
    return response


def _headers_first(events: Iterable[bytes]) -> Iterator[bytes]:
    # gunicorn sends the status line and headers on the first write, even an empty
    # one, so clients see the 200 before the request waits for the model.
    yield b""
    yield from events
