"""A request for an on-demand model: relay it to a worker holding it, or have a pool worker load it first.

The request waits in line behind the requests for that model that came before it (line.py),
at most LLM_QUEUE_TIMEOUT, while a pool worker loads it (pool.py); then it is served like
any other, here or on the worker holding the model. A request that streams gets its 200
and keep-alives while it waits (load_stream.py).
"""

from __future__ import annotations

import logging
import math
import time

import gevent
from flask import Flask, Response, copy_current_request_context, g, request

from app import workers
from app.api.http.errors import InvalidRequestError, ServiceUnavailableError
from app.api.routing import line, load_stream, pool
from app.serving import disconnect, internal, relay, routing
from app.serving.waiting_line import Ticket
from app.settings.current import current_config

log = logging.getLogger(__name__)
# How long a relayed request waited for its model on the worker that relayed it (trusted
# only on a relayed request: the peers' marker says so).
WAITED_HEADER, WAITED_ENVIRON = "X-LLM-Load-Seconds", "HTTP_X_LLM_LOAD_SECONDS"


def serving_here() -> None:
    """The request is served with this pool worker's model: it stays loaded until the view is done
    (a view holds the engine before it hands the engine its choices)."""
    mine = pool.holder()
    if mine is not None and "holding_model" not in g:
        mine.worker.touch()  # its idle clock (ttl, eviction) starts again
        mine.in_flight += 1
        g.holding_model = mine
        if relay.is_relayed(request, workers.this_worker()):
            _note_wait(0.0)  # the worker that relayed it says how long it waited
            line.take()  # the next request in line for this model may come


def keep_alive(seconds: float | None) -> None:
    """Keep the on-demand model this pool worker serves the request with this long once idle (Ollama's
    `keep_alive`: 0 unloads it when idle, negative keeps it for good); start-up models stay regardless."""
    mine = pool.holder()
    if seconds is not None and mine is not None and mine.index == current_config().model_index:
        mine.keep_alive = seconds


def init_app(app: Flask) -> None:
    """Let go of the model when the view is done (its choices, if any, are the engine's by then)."""

    @app.teardown_request
    def _let_go(_: BaseException | None) -> None:
        mine = g.pop("holding_model", None)
        if mine is not None:
            mine.in_flight -= 1


def serve_on_demand(index: int, streams: bool = False) -> Response | None:
    """None to serve the request here (this worker holds model `index`, ready); else the response
    of the worker that holds it, once one does. A 503 if no worker could start loading it in
    time. A request that `streams` gets its 200 and keep-alives once a load is under way."""
    config = current_config()
    if internal.of(request.environ) is not None:  # a batch line, run by a start-up model's worker
        raise InvalidRequestError(
            f"The model '{config.models[index].id}' loads on demand; batches run on the models "
            "loaded at start-up.",
            param="model",
        )
    arrived = time.monotonic()
    deadline = arrived + config.queue_timeout
    # In line behind the requests for it that came first (one sent on by a peer is in line there).
    ticket = None if relay.is_relayed(request, workers.this_worker()) else line.join(index)
    left = disconnect.HangUp(request.environ)  # a client gone while it waits loads nothing
    try:
        return _serve_when_held(index, streams, arrived, deadline, left, ticket)
    finally:
        if not left.handed_over:  # else the keep-alive stream leaves when it ends
            left.stop()
            line.leave(ticket)


def in_line(index: int) -> bool:
    """Whether requests wait for on-demand model `index`: a new one (not relayed) goes behind them."""
    waiting, worker = line.the_line(), workers.this_worker()
    if waiting is None or worker is None or relay.is_relayed(request, worker):
        return False
    snapshot = routing.snapshot_of(worker)
    return any(w.model == index for w in line.waiting(waiting, snapshot, current_config().queue_timeout))


def _serve_when_held(  # noqa: PLR0913 - the request's wait, as serve_on_demand set it up
    index: int, streams: bool, arrived: float, deadline: float, left: disconnect.HangUp, ticket: Ticket | None
) -> Response | None:
    config, mine = current_config(), pool.holder()
    while True:
        turn = line.my_turn(line.the_line(), pool.me(), ticket, config.queue_timeout)
        if turn and mine is not None and mine.index == index and mine.engine.ready:
            line.leave(ticket)
            _note_wait(time.monotonic() - arrived)
            serving_here()
            return None
        request.environ[WAITED_ENVIRON] = f"{time.monotonic() - arrived:.6f}"  # for the holder
        relayed = relay.to_model_holder(request, index, config, workers.this_worker()) if turn else None
        if relayed is not None:
            return relayed
        if relay.is_relayed(request, workers.this_worker()) and mine is None:
            break  # sent here for a model this worker does not hold: its sender retries
        if left.seen:
            log.info("a request for '%s' gave up waiting for it: its client hung up", config.models[index].id)
            return Response(status=499)  # nobody reads it
        if not turn and pool.held_ready(index):  # loaded: the requests that came first go to it first
            gevent.sleep(line.TURN)  # (a stuck one's ticket is passed over after LLM_QUEUE_TIMEOUT)
            continue
        if streams and (pool.loader_for(index) is not None or pool.loading(index)):  # a load can start or has
            return _stream_once_loaded(index, deadline, left, ticket)
        loaded = pool.load_somewhere(index, deadline)
        if time.monotonic() >= deadline:
            break
        if not loaded:  # else relay (or serve) at once
            gevent.sleep(pool.POLL)
    spec = config.models[index]
    raise ServiceUnavailableError(
        f"No worker could load '{spec.id}' within LLM_QUEUE_TIMEOUT ({config.queue_timeout:g} s): "
        f"the {config.on_demand_workers} on-demand workers serve other models; retry shortly."
    )


def _stream_once_loaded(
    index: int, deadline: float, left: disconnect.HangUp, ticket: Ticket | None
) -> Response:
    """Keep-alives at once, while a greenlet sees to the load; the holder's stream once loaded and
    this request's turn has come."""
    config, worker, waiting = current_config(), pool.me(), line.the_line()  # the stream asks with no app
    seeing_to_it = gevent.spawn(copy_current_request_context(pool.load_until_held), index, deadline, left)

    def ready_in() -> tuple[int | None, float]:
        seat = routing.ready_holder(routing.snapshot_of(worker), index)
        if seat is not None and not line.my_turn(waiting, worker, ticket, config.queue_timeout):
            return None, line.TURN  # loaded: the requests that came first go to it first
        return seat, load_stream.POLL

    def ended() -> None:
        left.stop()
        if waiting is not None and ticket is not None:
            waiting.leave(ticket)

    left.handed_over = True
    return load_stream.keep_alive_until_loaded(request, config, worker.table, ready_in, seeing_to_it, ended)


def _note_wait(waited: float) -> None:
    """What Ollama reports as `load_duration`: how long the request waited for its model, here or
    (told by its header) on the worker that relayed it; `g.model_ready_at`: when that wait ended."""
    if "load_seconds" in g:
        return
    if relay.is_relayed(request, workers.this_worker()):
        try:
            told = float(request.headers.get(WAITED_HEADER, "0"))
        except ValueError:
            told = 0.0
        # (A client's own header may ride along on other relays: bounded, never NaN.)
        waited = min(max(told, 0.0), float(current_config().queue_timeout)) if math.isfinite(told) else 0.0
    g.load_seconds, g.model_ready_at = waited, time.monotonic()
