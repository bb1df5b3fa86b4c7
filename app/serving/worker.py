"""gunicorn's gevent worker, made to drain: connections close after their answer, idle ones go at stop.

gunicorn ignores a Connection header set by the application, so closing connections
while the instance drains (app/serving/drain.py) has to happen here, where the
request is. And gunicorn's graceful stop waits for every open connection, including
keep-alive connections that idle between requests (a proxy's pool, an SDK's): those
would hold a stopping worker until LLM_GRACEFUL_TIMEOUT. They carry no request, so
they are closed when the worker is told to stop; connections with a request finish.
A connection accepted but not yet read (a reload's stop can come between a client's
connect and its request) is not idle: a client that connects sends, so such connections
get a moment to, and the few bytes of a next request already waiting keep theirs open.
"""

from __future__ import annotations

import select
import time
from typing import Any

import gevent
from gunicorn.workers.ggevent import GeventWorker  # type: ignore[import-untyped]  # gunicorn has no type hints

from app.serving import at_stop, detached, protocol_errors
from app.serving.drain import DrainFlag

# How long a connection accepted before the stop, with no request yet, has to send one.
FIRST_REQUEST_GRACE = 5.0


class DrainingGeventWorker(GeventWorker):  # type: ignore[misc]  # gunicorn has no type hints
    """A gevent worker that knows which of its connections are between requests."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        protocol_errors.install()  # its refusals of unparsable requests in JSON, not HTML
        self._connections: dict[gevent.Greenlet, Any] = {}  # one greenlet per open connection: its socket
        self._answering: set[gevent.Greenlet] = set()  # of which, those with a request under way
        self._answered: set[gevent.Greenlet] = set()  # and those that have answered one already
        self._stop_by: float | None = None  # when a graceful stop must be over (monotonic)
        self.drain_flag: DrainFlag | None = None  # the instance's, set by gunicorn.conf.py after fork

    def run(self) -> None:
        super().run()  # returns once the open connections are done, or at the graceful timeout
        if self._stop_by is not None and detached.running():
            # Background responses have no connection for gunicorn to wait on: wait here.
            self.log.info("waiting for %d background responses to finish", detached.running())
            detached.wait(self._stop_by, tick=self.notify)
        if self._stop_by is not None:
            at_stop.run(self._stop_by)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        me = gevent.getcurrent()
        self._connections[me] = client
        try:
            super().handle(listener, client, addr)
        finally:
            self._connections.pop(me, None)
            self._answered.discard(me)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        if self.drain_flag is not None and self.drain_flag.up:
            req.must_close = True  # gunicorn then answers with Connection: close, and closes
        me = gevent.getcurrent()
        self._answering.add(me)
        try:
            return super().handle_request(listener_name, req, sock, addr)
        finally:
            self._answering.discard(me)
            self._answered.add(me)

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._stop_by = time.monotonic() + self.cfg.graceful_timeout
        detached.begin_stop()
        super().handle_exit(sig, frame)  # stop accepting; gunicorn waits for open connections
        gevent.spawn(self._close_idle)  # from a greenlet of its own, as this runs in a signal handler

    def _close_idle(self) -> None:
        """Close the connections that wait for a request none has sent: at once, then after a grace."""
        idle = self._silent(answered_only=True)
        fresh = [greenlet for greenlet in self._connections if greenlet not in self._answered]
        self.log.info(
            "worker %s stopping: %d answering, %d idle closed, %d not yet sent",
            self.pid,
            len(self._answering),
            len(idle),
            len(set(fresh) - self._answering),
        )
        # StopIteration is how gunicorn's keep-alive loop ends a connection quietly.
        gevent.killall(idle, exception=StopIteration, block=False)
        gevent.sleep(FIRST_REQUEST_GRACE)
        gevent.killall(self._silent(answered_only=False), exception=StopIteration, block=False)

    def _silent(self, answered_only: bool) -> list[gevent.Greenlet]:
        """Connections between requests with no byte of a next one waiting (all, or past a first)."""
        waiting = [
            greenlet
            for greenlet in self._connections
            if greenlet not in self._answering and (greenlet in self._answered or not answered_only)
        ]
        if not waiting:
            return []
        sockets = {self._connections[greenlet]: greenlet for greenlet in waiting}
        sent, _, _ = select.select(list(sockets), [], [], 0)  # gevent's: a poll, never a wait
        return [greenlet for sock, greenlet in sockets.items() if sock not in sent]
