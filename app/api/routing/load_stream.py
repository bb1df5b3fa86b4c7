"""A streamed request for an on-demand model being loaded: keep-alives now, the holder's stream once loaded.

A load takes seconds to minutes; a client (or a proxy's read timeout) should not sit on a
silent connection meanwhile. So once a load is under way, a request that asked to
stream gets its 200 and SSE keep-alive comments at once; when a worker holds the model
ready, the request goes to it (over the peers' sockets, as any relay) and its events
follow unchanged. A failure after the 200 is one error event in the route's own
protocol (what the openai and anthropic SDKs raise), never a broken stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent
from flask import Request, Response

from app.api.http import sse
from app.serving import relay
from app.serving.peers import PeerTable
from app.settings.config import Config

POLL = 0.1  # seconds between looks at the peer table while the model loads


def keep_alive_until_loaded(
    request: Request,
    config: Config,
    table: PeerTable,
    holder_seat: Callable[[], tuple[int | None, float]],
    loading: gevent.Greenlet,
    ended: Callable[[], object],
) -> Response:
    """A streaming response: keep-alives until `holder_seat()` names a worker holding the model ready
    (it also says how soon to ask again) unless `loading`, the greenlet seeing to the load, ends
    saying why not; then that worker's answer to `request`. `ended` is called when the stream
    ends, however it ended."""
    forward = relay.forward_of(request)
    deadline = time.monotonic() + config.queue_timeout

    def events() -> Iterator[bytes]:
        try:
            yield from waited()
        finally:
            ended()

    def waited() -> Iterator[bytes]:
        last = time.monotonic()
        while True:
            seat, again = holder_seat()
            if seat is not None:
                break
            if loading.dead and loading.value is not None:  # it could not: what stopped it
                yield failure(forward.full_path, str(loading.value))
                return
            if time.monotonic() >= deadline:
                yield failure(forward.full_path, f"The model did not load within {config.queue_timeout:g} s.")
                return
            gevent.sleep(again)
            if config.sse_keepalive and time.monotonic() - last >= config.sse_keepalive:
                last = time.monotonic()
                yield sse.KEEPALIVE
        opened = relay.open_forward(forward, config, table, seat)
        if opened is None:
            yield failure(forward.full_path, "The worker holding the model went away; retry.")
            return
        connection, upstream = opened
        try:
            if upstream.status != 200:
                yield failure(forward.full_path, _message(upstream.read()))
                return
            while data := upstream.read1(65536):
                yield data
        finally:
            relay.hang_up(connection)
            connection.close()

    return sse.stream_response(events())


def failure(path: str, message: str) -> bytes:
    """One error event after the 200, as the route's protocol sends it."""
    if path.startswith("/v1/messages"):  # Anthropic's `error` event
        return sse.named_event("error", {"type": "error", "error": {"type": "api_error", "message": message}})
    # OpenAI's: an event whose data holds `error` (the openai SDKs raise it as APIError).
    error = {"message": message, "type": "service_unavailable", "param": None, "code": None}
    return sse.event({"error": error})


def _message(body: bytes) -> str:
    try:
        answer: Any = json.loads(body)
        return str(answer["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200] or "The worker holding the model refused the request."
