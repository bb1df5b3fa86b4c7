"""Work a worker does for nobody's open connection (background responses): tracked, so a stop waits for it.

gunicorn's graceful stop waits for open connections only; a background response's run
has none, so without this it would be cut off by the worker's exit and stay unfinished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

_running: set[threading.Thread] = set()


class Handoff:
    """What a request settles when it ends (its key's place, its tokens), settled instead when the
    work it started apart ends: a background response holds its key's place while it runs."""

    def __init__(self) -> None:
        self._settle: list[Callable[[int], object]] = []
        self._tokens: int | None = None  # set once the work has ended

    def on_end(self, settle: Callable[[int], object]) -> None:
        """Call `settle(tokens)` when the work ends (at once if it has)."""
        if self._tokens is not None:
            settle(self._tokens)
        else:
            self._settle.append(settle)

    def end(self, tokens: int) -> None:
        """The work has ended, having used `tokens` (prompt and completion)."""
        self._tokens = tokens
        settle, self._settle = self._settle, []
        for each in settle:
            each(tokens)


_stopping = [False]  # a plain flag: set from a signal handler, in a module imported before gevent patches


def begin_stop() -> None:
    """The worker was told to stop: work nobody waits for yet (batch lines) is no longer taken on."""
    _stopping[0] = True


def stopping() -> bool:
    return _stopping[0]


def start(thread: threading.Thread) -> None:
    """Start `thread` (a greenlet under gevent's patching) and keep it until it ends."""
    _running.add(thread)
    thread.start()


def running() -> int:
    for thread in [t for t in _running if not t.is_alive()]:
        _running.discard(thread)
    return len(_running)


def wait(deadline: float, tick: Callable[[], object]) -> None:
    """Until every tracked run has ended or `deadline` (time.monotonic()) has passed, calling `tick`
    each second (gunicorn's heartbeat: a worker that stops beating is killed as hung)."""
    while running() and time.monotonic() < deadline:
        tick()
        next(iter(_running)).join(min(1.0, max(0.0, deadline - time.monotonic())))
