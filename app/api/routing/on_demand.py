"""A request for an on-demand model: relay it to a worker holding it, or have a pool worker load it first.

Which pool worker loads it: one holding no model (this one first, saving a hop), else the
one whose model has been idle longest (least recently used, never one serving requests).
That worker is told over its peer socket with an ordinary relayed `/models/load`, so a
load is the same code whether an operator or a request asked for it. The request waits
(at most LLM_QUEUE_TIMEOUT) and is then served like any other.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

import gevent
from flask import Flask, Response, copy_current_request_context, current_app, g, request

from app import workers
from app.api.http.errors import InvalidRequestError, ServiceUnavailableError
from app.api.routing import load_stream
from app.serving import disconnect, internal, peers, relay, routing
from app.serving.model_holder import Busy, LoadFailed, ModelHolder
from app.settings.current import current_config

log = logging.getLogger(__name__)
POLL = 0.1  # seconds between looks at the peer table while a model loads elsewhere
# How long a relayed request waited for its model on the worker that relayed it (trusted
# only on a relayed request: the peers' marker says so).
WAITED_HEADER, WAITED_ENVIRON = "X-LLM-Load-Seconds", "HTTP_X_LLM_LOAD_SECONDS"


def holder() -> ModelHolder | None:
    """This worker's model holder, if it is a pool worker."""
    held: ModelHolder | None = current_app.extensions.get("model_holder")
    return held


def serving_here() -> None:
    """The request is served with this pool worker's model: it stays loaded until the view is done
    (a view holds the engine before it hands the engine its choices)."""
    mine = holder()
    if mine is not None and "holding_model" not in g:
        mine.worker.touch()  # its idle clock (ttl, eviction) starts again
        mine.in_flight += 1
        g.holding_model = mine
        if relay.is_relayed(request, workers.this_worker()):
            _note_wait(0.0)  # the worker that relayed it says how long it waited


def keep_alive(seconds: float | None) -> None:
    """Keep the on-demand model this pool worker serves the request with this long once idle (Ollama's
    `keep_alive`: 0 unloads it when idle, negative keeps it for good); start-up models stay regardless."""
    mine = holder()
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
    left = disconnect.HangUp(request.environ)  # a client gone while it waits loads nothing
    try:
        return _serve_when_held(index, streams, arrived, deadline, left)
    finally:
        if not left.handed_over:  # else the keep-alive stream stops watching when it ends
            left.stop()


def _serve_when_held(
    index: int, streams: bool, arrived: float, deadline: float, left: disconnect.HangUp
) -> Response | None:
    config, mine = current_config(), holder()
    while True:
        if mine is not None and mine.index == index and mine.engine.ready:
            _note_wait(time.monotonic() - arrived)
            serving_here()
            return None
        request.environ[WAITED_ENVIRON] = f"{time.monotonic() - arrived:.6f}"  # for the holder
        relayed = relay.to_model_holder(request, index, config, workers.this_worker())
        if relayed is not None:
            return relayed
        if relay.is_relayed(request, workers.this_worker()) and mine is None:
            break  # sent here for a model this worker does not hold: its sender retries
        if left.seen:
            log.info("a request for '%s' gave up waiting for it: its client hung up", config.models[index].id)
            return Response(status=499)  # nobody reads it
        if streams and (_loader_for(index) is not None or _loading(index)):  # a load can start, or has
            seeing_to_it = gevent.spawn(copy_current_request_context(_load_until_held), index, deadline, left)
            worker = me()  # the stream reads the table after the view has returned: no app then

            def ready_in(worker: peers.Worker = worker) -> int | None:
                return routing.ready_holder(routing.snapshot_of(worker), index)

            left.handed_over = True
            return load_stream.keep_alive_until_loaded(
                request, config, worker.table, ready_in, seeing_to_it, left.stop
            )
        loaded = _load_somewhere(index, deadline)
        if time.monotonic() >= deadline:
            break
        if not loaded:  # else relay (or serve) at once
            gevent.sleep(POLL)
    spec = config.models[index]
    raise ServiceUnavailableError(
        f"No worker could load '{spec.id}' within LLM_QUEUE_TIMEOUT ({config.queue_timeout:g} s): "
        f"the {config.on_demand_workers} on-demand workers serve other models; retry shortly."
    )


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


def load(index: int) -> None:
    """Return once a ready worker holds model `index` (an operator's /models/load); 503 if none can."""
    stopped = _load_until_held(index, time.monotonic() + current_config().queue_timeout)
    if stopped is not None:
        raise ServiceUnavailableError(stopped)


def unload(index: int) -> list[int]:
    """Unload model `index` from every pool worker holding it: the slots that could not (serving)."""
    config, mine = current_config(), holder()
    busy: list[int] = []
    for peer in _holding(index):
        if mine is not None and peer.slot == mine.worker.slot:
            if not mine.unload("request"):
                busy.append(peer.slot)
            continue
        named = {"model": config.models[index].id}
        status, _ = relay.order(me(), peer.slot, "/models/unload", named, key(), config)
        if status != 200:
            busy.append(peer.slot)
    return busy


def load_here(index: int) -> None:
    """This pool worker loads model `index` (a relayed order); Busy or LoadFailed if it cannot."""
    mine = holder()
    if mine is None:
        raise Busy("this worker holds its model for good (it is not an on-demand worker)")
    mine.load(index, current_config().queue_timeout)


def _load_somewhere(index: int, deadline: float) -> bool:
    """Have the best pool worker load model `index`, unless one is loading it already; True once
    a worker (this one or the one told) holds it ready."""
    config, mine = current_config(), holder()
    target = _loader_for(index)
    if target is None:
        return False  # loading somewhere already, or no worker free yet: wait
    if mine is not None and target == mine.worker.slot:
        try:
            mine.load(index, max(0.0, deadline - time.monotonic()))
        except Busy:
            return False
        except LoadFailed as exc:
            raise _failed(config.models[index].id, str(exc)) from None
        return True
    named = {"model": config.models[index].id}
    status, body = relay.order(me(), target, "/models/load", named, key(), config)
    if status == 503 and body:  # llama.cpp could not load it there: the worker says why
        raise ServiceUnavailableError(_message(body))
    return status == 200


def _load_until_held(index: int, deadline: float, left: disconnect.HangUp | None = None) -> str | None:
    """Until a worker holds model `index` ready: have one load it (waiting for a free one, or for
    a load under way). What stopped it, if something did (llama.cpp's refusal, the deadline, the
    client of the request that asked for it hanging up)."""
    try:
        while not _held_ready(index):
            if left is not None and left.seen:
                return "the client hung up"
            if not _load_somewhere(index, deadline):
                if time.monotonic() >= deadline:
                    config = current_config()
                    return (
                        f"No on-demand worker was free to load '{config.models[index].id}' within "
                        f"LLM_QUEUE_TIMEOUT ({config.queue_timeout:g} s); retry shortly."
                    )
                gevent.sleep(POLL)
    except ServiceUnavailableError as exc:
        return exc.message
    return None


def _ready_in(index: int) -> int | None:
    """The slot of a worker holding model `index` ready (this one included), if any."""
    return routing.ready_holder(_snapshot(), index)


def _loading(index: int) -> bool:
    return routing.loading(_snapshot(), index)


def _loader_for(index: int) -> int | None:
    """The slot of the pool worker that should load model `index`; None to wait instead."""
    mine = holder()
    return routing.loader_for(_snapshot(), index, None if mine is None else mine.worker.slot)


def _holding(index: int) -> list[peers.Peer]:
    return _snapshot().holding(index)


def _held_ready(index: int) -> bool:
    return _ready_in(index) is not None


def _snapshot() -> routing.Snapshot:
    return routing.snapshot_of(me())


def me() -> peers.Worker:
    """This worker's place in the peer table (a 503 outside gunicorn, where there are no peers)."""
    worker = workers.this_worker()
    if worker is None:
        raise ServiceUnavailableError("Models load on demand only under gunicorn.")
    return worker


def this_slot() -> int:
    """This worker's slot in the peer table (-1 outside gunicorn)."""
    worker = workers.this_worker()
    return worker.slot if worker is not None else -1


def table() -> peers.PeerTable:
    """The peer table (a 503 outside gunicorn, where there are no peers)."""
    return me().table


def key() -> str | None:
    """The client's key, to send on with an order to another worker."""
    return request.headers.get("Authorization") or (
        f"Bearer {request.headers['X-Api-Key']}" if "X-Api-Key" in request.headers else None
    )


def _failed(model: str, reason: str) -> ServiceUnavailableError:
    return ServiceUnavailableError(f"The model '{model}' could not be loaded: {reason}")


def _message(body: bytes) -> str:
    try:
        answer: Any = json.loads(body)
        return str(answer["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200]
