"""Notice at once when a client hangs up, even while nothing is being written to it."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import gevent
import gevent.socket


def watch(environ: dict[str, Any], on_disconnect: Callable[[], object]) -> Callable[[], object]:
    """Call `on_disconnect` if the client closes its connection; return a function that stops watching.

    A write to a closed socket fails only when something is written, so a request
    queued behind another or waiting on a long prompt would hold its place (and the
    model) for nothing. Peeking at the socket sees the hang-up as it happens, as
    llama.cpp's server does. Peeking consumes nothing, so a pipelined next request
    is left for gunicorn to read.
    """
    sock = environ.get("gunicorn.socket")
    if sock is None:  # not under gunicorn (e.g. Flask's test client)
        return lambda: None
    watcher = gevent.spawn(_wait_for_hangup, sock, on_disconnect)
    return lambda: watcher.kill(block=False)


class HangUp:
    """Whether the client has hung up since this began watching (until `stop`)."""

    def __init__(self, environ: dict[str, Any]) -> None:
        self.seen = False
        self.handed_over = False  # to a response that stops watching when it ends
        self.stop = watch(environ, self._saw)

    def _saw(self) -> None:
        self.seen = True


def _wait_for_hangup(sock: socket.socket, on_disconnect: Callable[[], object]) -> None:
    try:
        # A watcher of our own: waiting in sock.recv would take the socket's read event,
        # which gunicorn needs for the next request on this keep-alive connection.
        gevent.socket.wait_read(sock.fileno())
        data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:  # woken, yet nothing to read after all: not a hang-up
        return
    except OSError:
        data = b""
    if not data:
        on_disconnect()
