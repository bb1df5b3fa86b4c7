"""A request for a start-up model whose worker sleeps: served by an awake peer, or waking the model here.

A worker of the same model that is awake and has a free sequence serves it (no load at
all); otherwise this worker wakes its model. A request that streams gets its 200 and
keep-alives while the model loads, then the answer (relayed back to this worker, as a
streamed on-demand load does); any other request waits for the load in its view.
"""

from __future__ import annotations

from typing import Any

import gevent
from flask import Response, current_app, g, request

from app.api.routing import load_stream
from app.engine.loading import LoadingEngine
from app.serving import relay
from app.serving.sleep import Sleeper
from app.settings.current import current_config


def sleeper() -> Sleeper | None:
    """This worker's sleeper, if it is a start-up worker under gunicorn."""
    found: Sleeper | None = current_app.extensions.get("sleeper")
    return found


def awake_here(streams: bool) -> Response | None:
    """None to serve the request here (its model awake, or loading: the view waits for it); else the
    response of an awake peer, or for a stream, keep-alives until the model here has woken."""
    mine = sleeper()
    if mine is None:
        return None
    mine.worker.touch()  # the idle clock starts again
    if mine.asleep:
        config, worker = current_config(), mine.worker
        relayed = relay.to_awake_peer(request, config.model_index, config, worker)
        if relayed is not None:
            g.stats.relayed = True
            return relayed
        mine.wake()
        if streams and not relay.is_relayed(request, worker):
            engine = mine.engine
            waking = gevent.spawn(_woken, engine, config.timeout)

            def ready_in() -> tuple[int | None, float]:
                return (worker.seat if engine.ready else None), load_stream.POLL

            return load_stream.keep_alive_until_loaded(
                request, config, worker.table, ready_in, waking, lambda: None
            )
    if "holding_model" not in g:  # the model stays awake until the view has handed over its work
        mine.in_flight += 1
        g.holding_model = mine
    return None


def _woken(engine: LoadingEngine[Any], timeout: float) -> str | None:
    """Wait for the woken model: None once loaded, else why not (what the keep-alive stream reports)."""
    if engine.wait_ready(timeout):
        return None
    return engine.load_error or f"The model did not wake within {timeout:g} s."
