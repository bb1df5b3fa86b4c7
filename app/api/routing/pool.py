"""This worker's place in the on-demand pool, and the loads it orders: which pool worker loads a model.

Which pool worker loads it: one holding no model (this one first, saving a hop), else the
one whose model has been idle longest (routing.loader_for decides, in the order requests
wait in line). That worker is told over its peer socket with an ordinary relayed
`/models/load`, so a load is the same code whether an operator or a request asked for it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import gevent
from flask import current_app, request

from app import workers
from app.api.http.errors import ServiceUnavailableError
from app.api.routing import line
from app.serving import disconnect, peers, relay, routing
from app.serving.model_holder import Busy, LoadFailed, ModelHolder
from app.settings.current import current_config

POLL = 0.1  # seconds between looks at the peer table while a model loads elsewhere


def holder() -> ModelHolder | None:
    """This worker's model holder, if it is a pool worker."""
    held: ModelHolder | None = current_app.extensions.get("model_holder")
    return held


def load(index: int) -> None:
    """Return once a ready worker holds model `index` (an operator's /models/load); 503 if none can."""
    stopped = load_until_held(index, time.monotonic() + current_config().queue_timeout)
    if stopped is not None:
        raise ServiceUnavailableError(stopped)


def load_here(index: int) -> None:
    """This pool worker loads model `index` (a relayed order); Busy or LoadFailed if it cannot."""
    mine = holder()
    if mine is None:
        raise Busy("this worker holds its model for good (it is not an on-demand worker)")
    mine.load(index, current_config().queue_timeout)


def unload_here(index: int) -> bool:
    """This worker no longer holds model `index` (False: it serves requests with it)."""
    mine = holder()
    return mine is None or mine.index != index or mine.unload("request")


def load_somewhere(index: int, deadline: float) -> bool:
    """Have the best pool worker load model `index`, unless one is loading it already; True once
    a worker (this one or the one told) holds it ready."""
    config, mine = current_config(), holder()
    target = loader_for(index)
    if target is None:
        return False  # loading somewhere already, or no worker free yet: wait
    if mine is not None and target == mine.worker.seat:
        try:
            mine.load(index, max(0.0, deadline - time.monotonic()))
        except Busy:
            return False
        except LoadFailed as exc:
            raise failed(config.models[index].id, str(exc)) from None
        return True
    named = {"model": config.models[index].id}
    status, body = relay.order(me(), target, "/models/load", named, key(), config)
    if status == 503 and body:  # llama.cpp could not load it there: the worker says why
        raise ServiceUnavailableError(_message(body))
    return status == 200


def load_until_held(index: int, deadline: float, left: disconnect.HangUp | None = None) -> str | None:
    """Until a worker holds model `index` ready: have one load it (waiting for a free one, or for
    a load under way). What stopped it, if something did (llama.cpp's refusal, the deadline, the
    client of the request that asked for it hanging up)."""
    try:
        while not held_ready(index):
            if left is not None and left.seen:
                return "the client hung up"
            if not load_somewhere(index, deadline):
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
    """The seat of a worker holding model `index` ready (this one included), if any."""
    return routing.ready_holder(_snapshot(), index)


def loading(index: int) -> bool:
    return routing.loading(_snapshot(), index)


def loader_for(index: int) -> int | None:
    """The seat of the pool worker that should load model `index`; None to wait instead."""
    mine = holder()
    snapshot, waiting = _snapshot(), line.the_line()
    ticketed = [] if waiting is None else line.waiting(waiting, snapshot, current_config().queue_timeout)
    return routing.loader_for(snapshot, index, None if mine is None else mine.worker.seat, ticketed)


def holding(index: int) -> list[peers.Peer]:
    """The workers holding model `index` (ready, or loading it)."""
    return _snapshot().holding(index)


def held_ready(index: int) -> bool:
    return _ready_in(index) is not None


def _snapshot() -> routing.Snapshot:
    return routing.snapshot_of(me())


def me() -> peers.Worker:
    """This worker's place in the peer table (a 503 outside gunicorn, where there are no peers)."""
    worker = workers.this_worker()
    if worker is None:
        raise ServiceUnavailableError("Models load on demand only under gunicorn.")
    return worker


def table() -> peers.PeerTable:
    """The peer table (a 503 outside gunicorn, where there are no peers)."""
    return me().table


def key() -> str | None:
    """The client's key, to send on with an order to another worker."""
    return request.headers.get("Authorization") or (
        f"Bearer {request.headers['X-Api-Key']}" if "X-Api-Key" in request.headers else None
    )


def failed(model: str, reason: str) -> ServiceUnavailableError:
    return ServiceUnavailableError(f"The model '{model}' could not be loaded: {reason}")


def _message(body: bytes) -> str:
    try:
        answer: Any = json.loads(body)
        return str(answer["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200]
