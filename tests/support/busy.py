"""Keep a worker's sequences busy with long streams, so that other requests queue behind them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from tests.support.rawhttp import open_request, read_chunk, read_head

LONG_BODY = {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True}


@contextmanager
def model_busy(
    port: int, body: dict | None = None, sequences: int = 1, headers: dict[str, str] | None = None
) -> Iterator[threading.Event]:
    """Hold `sequences` sequences with long streams until the block exits, then hang up on them.

    Yields an event that is set once the (first) long stream has ended by itself (it should not).
    """
    with ExitStack() as stack:
        ended = stack.enter_context(_one_stream(port, body or LONG_BODY, headers))
        for _ in range(sequences - 1):
            stack.enter_context(_one_stream(port, body or LONG_BODY, headers))
        yield ended


@contextmanager
def _one_stream(port: int, body: dict, headers: dict[str, str] | None) -> Iterator[threading.Event]:
    sock = open_request(port, "POST", "/v1/completions", body, headers)
    reader = sock.makefile("rb")
    status, _ = read_head(reader)
    assert status == 200
    generating, ended = threading.Event(), threading.Event()

    def drain() -> None:
        try:
            while (chunk := read_chunk(reader)) is not None:
                if chunk.startswith(b"data: {"):
                    generating.set()
        except (OSError, ValueError):
            return
        ended.set()

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    assert generating.wait(30), "the long stream never started"
    try:
        yield ended
    finally:
        sock.shutdown(socket.SHUT_RDWR)
        thread.join(10)
        reader.close()
        sock.close()
