"""One admitted request as the views see it: iterate it for chunks, cancel it, close it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import gevent
import gevent.queue

from app.engine.errors import QueueTimeoutError
from app.engine.types import Chunk, GenerationRequest

if TYPE_CHECKING:
    from app.engine.engine import Engine

log = logging.getLogger(__name__)

# How often a queued request looks again at its deadline and its client.
_QUEUE_POLL = 0.25


class Generation:
    """One admitted request: iterate it for chunks; `cancel()` or `close()` to stop it.

    Iterating waits for the model (raising QueueTimeoutError past the queue timeout)
    and yields `None` whenever `idle` seconds pass with nothing to send, so a stream
    can write a keep-alive meanwhile. Chunks come from the engine's native thread.
    """

    def __init__(self, engine: Engine, requests: list[GenerationRequest]) -> None:
        self.requests = requests
        self.cancelled = False
        # Called while queued; may hand the request to an idle peer by raising (serving/relay.py).
        self.migrate: Callable[[], None] | None = None
        self._engine = engine
        self._idle = engine.config.sse_keepalive or None
        self._queue: gevent.queue.Queue[Chunk] = gevent.queue.Queue()
        self._hub = gevent.get_hub()
        self._closed = False
        self._finished = False
        self._on_close: list[Callable[[], object]] = []

    def __iter__(self) -> Iterator[Chunk | None]:
        try:
            yield from self._wait_for_model()
            if self.cancelled:
                log.info("request cancelled by its client while queued; it never reached the model")
                return
            self._engine.run_in_thread(self)
            open_choices = len(self.requests)
            while not self._finished:
                try:
                    chunk = self._queue.get(timeout=self._idle)
                except gevent.queue.Empty:
                    yield None
                    continue
                if chunk.finish_reason is not None:
                    open_choices -= 1
                stop = chunk.finish_reason in ("cancelled", "error")
                self._finished = open_choices == 0 or stop
                yield chunk
        finally:
            self.close()

    def _wait_for_model(self) -> Iterator[None]:
        """Queue for the worker's one generation slot, sending keep-alives meanwhile."""
        started = last_sent = time.monotonic()
        while not self._engine.slot.acquire(timeout=_QUEUE_POLL):
            now = time.monotonic()
            if self.cancelled:  # the client left while queued: never reach the model
                return
            if self.migrate is not None:
                self.migrate()
            if now - started > self._engine.config.queue_timeout:
                raise QueueTimeoutError(
                    f"The request waited {now - started:.0f}s for the model; the server is busy, retry later."
                )
            if self._idle and now - last_sent >= self._idle:
                last_sent = now
                yield None
        if self.cancelled:
            self._engine.slot.release()

    def cancel(self) -> None:
        """Stop generating at the next token, abort prompt processing, or leave the queue."""
        self.cancelled = True
        self._engine.abort_if_running(self)

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run `callback` once this generation is closed."""
        self._on_close.append(callback)

    def close(self) -> None:
        """Give back the queue place; cancel if unfinished. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if not self._finished:
            self.cancel()
        self._engine.count_admitted(-1)
        for callback in self._on_close:
            callback()

    def emit(self, chunk: Chunk) -> None:
        """Hand a chunk from the native thread to the request's greenlet (thread-safe)."""
        self._hub.loop.run_callback_threadsafe(self._queue.put, chunk)
