"""Run a blocking native call (llama.cpp's tokenizer, its grammar parser) off the gevent hub's thread.

A request's prompt is tokenized in the view that plans it: an agent's 12k-token prompt takes
llama.cpp's tokenizer about a tenth of a second, during which a call on the hub's thread would
stop every other greenlet of the worker (other streams' tokens, health checks, disconnects).
A greenlet hands the call to a native thread and waits for it cooperatively; a caller that is
already outside the hub (the engine's native thread) or is the hub itself runs it in place.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import gevent
from gevent._hub_local import get_hub_if_exists
from gevent.threadpool import ThreadPool

T = TypeVar("T")
THREADS = 2  # two requests tokenize at once, as llama-server's HTTP threads would

_pool: ThreadPool | None = None
_owner: tuple[int, object] | None = None  # the process and hub the pool belongs to


def start() -> None:
    """Start the threads now, from the hub's thread (the engine does, as it starts): a worker's
    threads are then all there at rest, before its first request, as a leak check counts them."""
    hub = gevent.get_hub()
    if gevent.getcurrent() is not hub:
        _pool_of(hub).size = THREADS


def run(call: Callable[..., T], *args: object) -> T:
    """`call(*args)`, in a native thread if the caller is a greenlet of the hub's thread."""
    hub = get_hub_if_exists()
    if hub is None or gevent.getcurrent() is hub:  # a native thread, or the hub's own loop
        return call(*args)
    pool = _pool_of(hub)
    # The call's own exception is carried back as a value: one raised in the pool's thread would
    # be printed by gevent as a traceback (a refused grammar is an ordinary 400) before reaching us.
    done, outcome = pool.apply(_caught, (call, args))
    if not done:
        raise outcome
    result: T = outcome
    return result


def _pool_of(hub: object) -> ThreadPool:
    global _pool, _owner
    if _pool is None or _owner != (os.getpid(), hub):  # made after fork, by the hub that waits on it
        _pool, _owner = ThreadPool(THREADS, hub=hub), (os.getpid(), hub)
    return _pool


def _caught(call: Callable[..., T], args: tuple[object, ...]) -> tuple[bool, Any]:
    try:
        return True, call(*args)
    except Exception as exc:  # noqa: BLE001 - raised again in the caller's greenlet
        return False, exc
