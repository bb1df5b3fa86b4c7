"""Hand a request from a busy worker to an idle one, streaming the answer back unchanged."""

from __future__ import annotations

import hmac
import http.client
import json
import logging
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flask import Request, Response

from app.engine.cache.prefix_blocks import block_hashes
from app.engine.engine import Engine
from app.engine.loading import LoadingEngine
from app.serving import disconnect, internal, peers, routing
from app.serving.peers import Worker
from app.serving.prefix_board import PrefixBoard
from app.settings.config import Config

log = logging.getLogger(__name__)

# Marks a request already relayed once, so it is never passed on again (nor counted
# again against its key's limits). Its value is the server's own secret: a client
# sending the header gains nothing.
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


class Migrated(Exception):  # noqa: N818 - a hand-over, not an error
    """A queued request was handed to a peer that became idle: answer with the peer's response."""

    def __init__(self, connection: http.client.HTTPConnection, upstream: http.client.HTTPResponse) -> None:
        super().__init__("relayed to an idle peer")
        self.connection, self.upstream = connection, upstream

    def body(self) -> Iterator[bytes]:
        """The peer's response body, chunk by chunk; hangs up on the peer when closed early."""
        try:
            yield from _body(self.upstream)
        finally:
            hang_up(self.connection)
            self.connection.close()

    def response(self, environ: dict[str, object]) -> Response:
        """The peer's whole response, as ours."""
        return _as_response(environ, self.connection, self.upstream)


def is_relayed(request: Request, worker: Worker | None) -> bool:
    """Whether `request` came from another worker of this server (which has counted it), or from
    this worker itself (a batch line: see internal.py). `worker`: this one (None outside gunicorn)."""
    if internal.of(request.environ) is not None:
        return True
    marker = request.headers.get(RELAYED_HEADER, "")
    return worker is not None and hmac.compare_digest(marker.encode(), worker.table.secret.encode())


def to_model_holder(request: Request, model: int, config: Config, worker: Worker | None) -> Response | None:
    """Relay `request` to the ready worker holding `model` with the most room; None if there is none."""
    if worker is None or is_relayed(request, worker):
        return None
    seat = routing.model_holder(routing.snapshot_of(worker), model)
    return None if seat is None else _relay(request, config, worker.table, seat)


def to_awake_peer(request: Request, model: int, config: Config, worker: Worker | None) -> Response | None:
    """Relay `request`, which landed on a worker whose model sleeps, to an awake worker of `model` with
    room (routing.awake_peer decides); None to wake the model here."""
    if worker is None or is_relayed(request, worker):
        return None
    seat = routing.awake_peer(routing.snapshot_of(worker), model)
    return None if seat is None else _relay(request, config, worker.table, seat)


def to_cached_peer(
    request: Request,
    engine: LoadingEngine[Any],
    prompt: list[int],
    scope: str,
    worker: Worker | None,
    board: PrefixBoard | None,
) -> Response | None:
    """Relay `request` to the worker whose cache holds a longer prefix of `prompt` (for its cache
    `scope`) than this one's (routing.warmer_peer decides, from the workers' prefix `board`); None
    to serve it here."""
    if worker is None or board is None or is_relayed(request, worker) or not engine.config.route_by_cache:
        return None
    blocks = block_hashes(prompt, scope)
    chosen = routing.warmer_peer(routing.snapshot_of(worker), lambda seat: board.cached_tokens(seat, blocks))
    if chosen is None:
        return None
    seat, cached, here = chosen
    relayed = _relay(request, engine.config, worker.table, seat)
    if relayed is not None:
        log.info(
            "sent to worker slot %d, whose cache holds %d prompt tokens (this one: %d)", seat, cached, here
        )
    return relayed


def to_keyed_peer(
    request: Request,
    engine: LoadingEngine[Any],
    prompt: list[int],
    scope: str,
    key: str | None,
    worker: Worker | None,
    board: PrefixBoard | None,
) -> Response | None:
    """Relay `request` to its `prompt_cache_key`'s home worker (routing.keyed_peer decides), so that
    requests sharing a key share a cache; None to serve it here. A key is a key within its cache
    `scope`: two tenants' equal keys have homes of their own."""
    if key is None or worker is None or board is None or is_relayed(request, worker):
        return None
    if not engine.config.route_by_cache:
        return None
    blocks = block_hashes(prompt, scope)
    scoped = f"{scope}\0{key}" if scope else key
    seat = routing.keyed_peer(routing.snapshot_of(worker), scoped, lambda at: board.cached_tokens(at, blocks))
    if seat is None:
        return None
    relayed = _relay(request, engine.config, worker.table, seat)
    if relayed is not None:
        log.info("sent to worker slot %d, its prompt_cache_key's home", seat)
    return relayed


def to_worker(request: Request, config: Config, worker: Worker, seat: int) -> Response | None:
    """Relay `request` to the worker in `seat` (one a route named: its slots, its sequences)."""
    return None if is_relayed(request, worker) else _relay(request, config, worker.table, seat)


def to_idle_peer(request: Request, engine: LoadingEngine[Any], worker: Worker | None) -> Response | None:
    """Relay `request` to a worker with a free sequence if this one has none; None to serve it here."""
    if worker is None or is_relayed(request, worker):
        return None
    seat = routing.freer_peer(routing.snapshot_of(worker), engine.has_room)
    return None if seat is None else _relay(request, engine.config, worker.table, seat)


def migrator(request: Request, engine: Engine, worker: Worker | None) -> Callable[[], None] | None:
    """For a request about to queue here: a check, run while it waits, that hands it to a peer
    that has a free sequence (raising Migrated), so that no request waits while a sequence idles."""
    if worker is None or is_relayed(request, worker):
        return None
    forward = forward_of(request)

    def try_peer() -> None:
        seat = routing.freer_peer(routing.snapshot_of(worker), has_room=False)
        if seat is None:
            return
        opened = _open(forward, engine.config, worker.table, seat)
        if opened is None:
            return
        if opened[1].status == 200:
            log.info("queued request moved to worker slot %d, which has a free sequence", seat)
            raise Migrated(*opened)
        opened[1].read()  # the peer got busy meanwhile (a 429): stay in our queue
        opened[0].close()

    return try_peer


def _relay(request: Request, config: Config, table: peers.PeerTable, seat: int) -> Response | None:
    """The response of the worker in `seat` to `request`, as ours; None if it cannot be reached."""
    opened = _open(request, config, table, seat)
    return None if opened is None else _as_response(request.environ, *opened)


def order(
    worker: Worker, seat: int, path: str, body: object, authorization: str | None, config: Config
) -> tuple[int, bytes]:
    """Send the worker in `seat` an operator's request (`path` with a JSON `body`): its status and body.

    E.g. /models/load: the order is an ordinary request, relayed, so the worker acts on itself;
    it carries the client's key, which this worker has checked.
    """
    headers = {"Content-Type": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    opened = _open(_Forward("POST", path, json.dumps(body).encode(), headers), config, worker.table, seat)
    if opened is None:
        return 503, b""
    connection, response = opened
    try:
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return 503, b""
    finally:
        connection.close()


def forward_of(request: Request) -> _Forward:
    """What relaying `request` later needs of it (after its view has returned)."""
    return _Forward(request.method, request.full_path.rstrip("?"), request.get_data(), dict(request.headers))


def open_forward(
    forward: _Forward, config: Config, table: peers.PeerTable, seat: int
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse] | None:
    """Send `forward` to the worker of `table` in `seat` (this one's own socket too); None if it
    cannot be reached."""
    return _open(forward, config, table, seat)


@dataclass
class _Forward:
    """What a relay sends on: the request as it came."""

    method: str
    full_path: str
    body: bytes
    headers: dict[str, str]


def _open(
    request: Request | _Forward, config: Config, table: peers.PeerTable, seat: int
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse] | None:
    """Send the request to the worker of `table` in `seat`; None if it cannot be reached."""
    # Silence from the peer lasts at most the queue wait plus one generation (streams also
    # send keep-alives); past that, the peer is stuck and the relay gives up.
    timeout = config.queue_timeout + (config.max_generation_seconds or 3600) + 30
    connection = _UnixConnection(table.socket_path(seat), timeout=timeout)
    body = request.body if isinstance(request, _Forward) else request.get_data()
    path = request.full_path.rstrip("?")
    headers = {
        k: v for k, v in dict(request.headers).items() if k.lower() not in _HOP_BY_HOP | {"content-length"}
    }
    headers[RELAYED_HEADER] = table.secret
    try:
        connection.request(request.method, path, body, headers)
        return connection, connection.getresponse()
    except OSError as exc:  # the peer has just exited or is restarting: serve it here
        log.info("could not relay to worker slot %d (%s); serving here", seat, exc)
        connection.close()
        return None


def _as_response(
    environ: dict[str, object], connection: http.client.HTTPConnection, upstream: http.client.HTTPResponse
) -> Response:
    response = Response(
        _body(upstream),
        status=upstream.status,
        headers=[(k, v) for k, v in upstream.getheaders() if k.lower() not in _HOP_BY_HOP],
    )
    # If our client hangs up, hang up on the peer too, so that it cancels.
    stop_watching = disconnect.watch(environ, lambda: hang_up(connection))
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


def hang_up(connection: http.client.HTTPConnection) -> None:
    """Close our side of a relay at once, so that the peer sees its client gone and cancels."""
    if connection.sock is not None:
        try:
            connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
