"""Keep a worker's model busy with a long stream, so other requests queue behind it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.integration.rawhttp import open_request, read_chunk, read_head

LONG_BODY = {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True}


@contextmanager
def model_busy(port: int, body: dict | None = None) -> Iterator[threading.Event]:
    """Hold the model with a long stream until the block exits, then hang up on it.

    Yields an event that is set once the long stream has ended by itself (it should not).
    """
    sock = open_request(port, "POST", "/v1/completions", body or LONG_BODY)
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
