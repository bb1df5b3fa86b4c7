"""One asyncio event loop per worker, run in a greenlet, for the MCP SDK's coroutines.

The `mcp` SDK is asyncio (anyio over httpx2). gevent's patching makes asyncio's selector wait
cooperatively, so a loop run in a greenlet yields to the hub while it waits; but asyncio allows
only one running loop per thread, and every greenlet of a worker shares its thread. So there
is one loop, started on first use in the worker that needs it, and every request hands its
coroutine over and waits on a gevent result: other requests and the engine's deliveries go on
meanwhile (tested with a ticking greenlet beside slow MCP calls).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import gevent
import gevent.event

T = TypeVar("T")
log = logging.getLogger(__name__)

_loop: asyncio.AbstractEventLoop | None = None


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
        _loop.set_exception_handler(_quietly)
        gevent.spawn(_loop.run_forever)
    return _loop


def run(coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
    """The coroutine's result, waited for cooperatively; gevent.Timeout (the coroutine cancelled)
    after `timeout` seconds."""
    result: gevent.event.AsyncResult = gevent.event.AsyncResult()
    future = asyncio.run_coroutine_threadsafe(coroutine, _running_loop())

    def done(finished: concurrent.futures.Future[T]) -> None:  # on the loop's greenlet
        if finished.cancelled():
            result.set_exception(gevent.Timeout(timeout))
        elif finished.exception() is not None:
            result.set_exception(finished.exception())
        else:
            result.set(finished.result())

    future.add_done_callback(done)
    try:
        return result.get(timeout=timeout)  # type: ignore[no-any-return]
    except BaseException:  # the deadline, or the waiting greenlet killed (its client hung up)
        future.cancel()  # the SDK's task group unwinds on the loop: connections closed
        raise


def _quietly(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A call given up on (its deadline passed) may still end in an error nobody waits for: one line."""
    error = context.get("exception")
    log.info(
        "an MCP exchange given up on ended: %s", f"{type(error).__name__}" if error else context["message"]
    )
