"""One admitted request as the views see it: iterate it for chunks, cancel it, close it."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator

import gevent.event
import gevent.queue

from app.engine.errors import QueueTimeoutError
from app.engine.types import ChoicePlan, Chunk

log = logging.getLogger(__name__)

# How often a queued request looks again at its deadline and its client.
_QUEUE_POLL = 0.25
# Reasons that end the whole request, not just one choice.
ENDING = ("cancelled", "error", "kv_full")


class Generation:
    """One admitted request of one or more choices: iterate it for chunks; `cancel()` or `close()` it.

    Iterating waits for a free sequence (raising QueueTimeoutError past the queue timeout)
    and yields `None` whenever `idle` seconds pass with nothing to send, so a stream can
    write a keep-alive meanwhile. Everything here runs on the hub; the batcher only reads
    `cancelled`, and its chunks arrive through `push`, called on the hub too.
    """

    def __init__(
        self,
        plans: list[ChoicePlan],
        release: Callable[[Generation], object],
        keepalive: float,
        queue_timeout: float,
    ) -> None:
        """`release` is called once, when it closes; `keepalive`: seconds of silence before a `None`
        (0: never); `queue_timeout`: seconds it may wait for a first sequence."""
        self.plans = plans
        self.cancelled = False
        self.started = False  # a first choice has a sequence
        self.queued = False  # counted among the requests waiting for one
        self.closed = False
        self.low_priority = False  # a batch line: waits behind interactive requests, and makes way
        self.preempted = False  # cancelled to make way for an interactive request (its runner retries)
        self.submitted_at = time.monotonic()
        self.started_at: float | None = None  # when a first choice got a sequence
        # Called while queued; may hand the request to an idle peer by raising (serving/relay.py).
        self.migrate: Callable[[], None] | None = None
        self.context = contextvars.copy_context()  # the request's (its log lines carry its id)
        self._release = release
        self._idle = keepalive or None
        self._queue_timeout = queue_timeout
        self._queue: gevent.queue.Queue[Chunk] = gevent.queue.Queue()
        self._started = gevent.event.Event()
        self._finished = False
        self._on_close: list[Callable[[], object]] = []

    def __iter__(self) -> Iterator[Chunk | None]:
        try:
            yield from self._wait_for_start()
            if self.cancelled:
                return
            open_choices = len(self.plans)
            while not self._finished:
                try:
                    chunk = self._queue.get(timeout=self._idle)
                except gevent.queue.Empty:
                    yield None
                    continue
                if chunk.finish_reason is not None:
                    open_choices -= 1
                self._finished = open_choices == 0 or chunk.finish_reason in ENDING
                yield chunk
        finally:
            self.close()

    def _wait_for_start(self) -> Iterator[None]:
        """Wait for a free sequence, in arrival order, sending keep-alives meanwhile."""
        started = last_sent = time.monotonic()
        while not self._started.wait(timeout=_QUEUE_POLL):
            now = time.monotonic()
            if self.cancelled:
                log.info("request cancelled by its client while queued; it never reached the model")
                return
            if self.migrate is not None:
                self.migrate()
            if now - started > self._queue_timeout:
                raise QueueTimeoutError(
                    f"The request waited {now - started:.0f}s for the model; the server is busy, retry later."
                )
            if self._idle and now - last_sent >= self._idle:
                last_sent = now
                yield None

    def mark_started(self) -> None:
        """The engine gave a first choice a sequence."""
        self.started = True
        self.started_at = time.monotonic()
        self._started.set()

    def push(self, chunk: Chunk) -> None:
        """A chunk from the batcher, delivered on the hub."""
        self._queue.put(chunk)

    def cancel(self) -> None:
        """Stop at the next step: leave the queue, or end prompt evaluation or generation."""
        self.cancelled = True

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run `callback` once this generation is closed."""
        self._on_close.append(callback)

    def close(self) -> None:
        """Give back the queue place; cancel if unfinished. Safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        if not self._finished:
            self.cancel()
        self._release(self)
        for callback in self._on_close:
            callback()


# What a step hands back: each chunk with the generation it belongs to.
Delivery = list[tuple[Generation, Chunk]]
