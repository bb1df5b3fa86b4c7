"""The one question the front asks of every routed request: served here, or relayed to another worker?

The choices themselves are pure functions over the peer table (app/serving/routing.py);
this is where a request meets them (front.py asks, before the view): served here (an
on-demand model this pool worker holds, kept loaded for the view; a start-up model, woken
first if it sleeps), relayed to the worker holding its model, or loaded on demand first.
"""

from __future__ import annotations

from flask import Response, g, request

from app import workers
from app.api.http.errors import InvalidRequestError, ServiceUnavailableError
from app.api.routing import on_demand, pool, waking
from app.serving import relay
from app.settings.current import current_config


def here_or_relay(
    index: int, streams: object = False, wakes: bool = True, loads: bool = True
) -> Response | None:
    """None when this worker serves a request for model `index` of LLM_MODELS; else the response
    of the worker that does. A request that `streams` (SSE) for a model loading on demand, or
    waking, gets keep-alives while it waits. With `wakes` False, a sleeping start-up model stays
    asleep (the view answers without it, or wakes it itself); with `loads` False, an on-demand
    model no worker holds stays unloaded (a 400)."""
    config = current_config()
    if index == config.model_index and not (config.models[index].on_demand and on_demand.in_line(index)):
        on_demand.serving_here()
        return waking.awake_here(bool(streams)) if wakes else None
    if config.models[index].on_demand and not loads and not pool.held_ready(index):
        raise InvalidRequestError(
            f"The model '{config.models[index].id}' is not loaded: a request that generates loads it "
            "(an operator's POST /models/load too).",
            param="model",
            code="model_not_loaded",
        )
    if config.models[index].on_demand:
        relayed = on_demand.serve_on_demand(index, bool(streams))
        if relayed is None:
            return None  # this pool worker has just loaded it
    else:
        relayed = relay.to_model_holder(request, index, config, workers.this_worker())
    if relayed is None:
        name = config.models[index].id
        raise ServiceUnavailableError(f"No worker holding '{name}' is ready; retry shortly.")
    g.stats.relayed = True  # the worker holding it logs and counts it
    return relayed
