"""SSE framing: the exact bytes every client parses, and headers that leave before the first event."""

from __future__ import annotations

import json
from collections.abc import Iterator

from app.api.http import sse
from tests.support import sse as parser


def test_an_event_is_one_compact_ascii_data_line_and_a_blank_line() -> None:
    frame = sse.event({"text": "héllo\u2028", "n": [1, 2]})
    assert frame == b'data: {"text":"h\\u00e9llo\\u2028","n":[1,2]}\n\n'
    assert frame.isascii() and b"\r" not in frame
    (event,) = parser.parse(frame)
    assert event.name is None and event.json() == {"text": "héllo\u2028", "n": [1, 2]}


def test_a_named_event_puts_its_name_first() -> None:
    frame = sse.named_event("message_stop", {"type": "message_stop"})
    assert frame == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    assert parser.named(frame) == [("message_stop", {"type": "message_stop"})]


def test_done_and_keepalive_are_whole_frames() -> None:
    assert parser.frames(sse.DONE + sse.KEEPALIVE) == [sse.DONE, sse.KEEPALIVE]
    (done,) = parser.parse(sse.KEEPALIVE + sse.DONE)
    assert done.done


def test_a_stream_response_sends_its_headers_before_the_first_event() -> None:
    produced: list[str] = []

    def events() -> Iterator[bytes]:
        produced.append("first")
        yield sse.event({"n": 1})

    response = sse.stream_response(events())
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["X-Accel-Buffering"] == "no"
    body = iter(response.response)
    assert next(body) == b"" and produced == []  # an empty first write: gunicorn sends the headers
    event = next(body)
    assert isinstance(event, bytes) and json.loads(event[6:]) == {"n": 1} and produced == ["first"]
