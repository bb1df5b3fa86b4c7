"""Hand a request from a busy worker to an idle one, streaming the answer back unchanged."""

from __future__ import annotations

import http.client
import logging
import socket
from collections.abc import Iterator

from flask import Request, Response

from app import balance, disconnect
from app.engine import Engine

log = logging.getLogger(__name__)

# Marks a request already relayed once, so it is never passed on again.
RELAYED_HEADER = "X-LLM-Relayed"
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
    "host",
    "date",
    "server",
}


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def to_idle_peer(request: Request, engine: Engine) -> Response | None:
    """Relay `request` to a less loaded worker if this one is busy; None to serve it here."""
    worker = balance.this_worker
    if worker is None or engine.admitted == 0 or request.headers.get(RELAYED_HEADER):
        return None
    peer = worker.table.least_loaded_peer(worker.slot)
    if peer is None or peer[1] >= engine.admitted:
        return None
    # Silence from the peer lasts at most the queue wait plus one generation (streams also
    # send keep-alives); past that, the peer is stuck and the relay gives up.
    config = engine.config
    timeout = config.queue_timeout + (config.max_generation_seconds or 3600) + 30
    connection = _UnixConnection(worker.table.socket_path(peer[0]), timeout=timeout)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP | {"content-length"}}
    headers[RELAYED_HEADER] = "1"
    try:
        connection.request(request.method, request.full_path.rstrip("?"), request.get_data(), headers)
        upstream = connection.getresponse()
    except OSError as exc:  # the peer has just exited or is restarting: serve it here
        log.info("could not relay to worker slot %d (%s); serving here", peer[0], exc)
        connection.close()
        return None
    response = Response(
        _body(upstream),
        status=upstream.status,
        headers=[(k, v) for k, v in upstream.getheaders() if k.lower() not in _HOP_BY_HOP],
    )
    # If our client hangs up, hang up on the peer too, so that it cancels.
    stop_watching = disconnect.watch(request.environ, lambda: _hang_up(connection))
    response.call_on_close(stop_watching)
    response.call_on_close(connection.close)
    return response


def _body(upstream: http.client.HTTPResponse) -> Iterator[bytes]:
    yield b""  # send our headers at once, as the peer did
    try:
        while data := upstream.read1(65536):  # one chunk at a time: events stay unbuffered
            yield data
    except (OSError, http.client.HTTPException):
        return  # the peer went away mid-answer; our client's stream simply ends


def _hang_up(connection: http.client.HTTPConnection) -> None:
    if connection.sock is not None:
        try:
            connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
