"""The one question a view asks after parsing: is this request served here, or relayed to another worker?

The choices themselves are pure functions over the peer table (app/serving/routing.py);
this is where a view's request meets them: served here (an on-demand model this pool
worker holds, kept loaded for the view; a start-up model, woken first if it sleeps),
relayed to the worker holding its model, or loaded on demand first.
"""

from __future__ import annotations

from flask import Response, g, request

from app import workers
from app.api.http.body import model_index
from app.api.http.errors import ServiceUnavailableError
from app.api.routing import on_demand, waking
from app.serving import relay
from app.settings.current import current_config


def route_here_or_relay(
    model: str | None, use: str | None = "generate", streams: object = False, wakes: bool = True
) -> Response | None:
    """None when this worker serves the request (for `model`, or the first that can do `use`); else
    the response of the worker that does. A request that `streams` (SSE) for a model loading on
    demand, or waking, gets keep-alives while it waits. With `wakes` False, a sleeping start-up
    model stays asleep (the view answers without it, or wakes it itself)."""
    return here_or_relay(model_index(model, use), streams, wakes)


def here_or_relay(index: int, streams: object = False, wakes: bool = True) -> Response | None:
    """As route_here_or_relay, for model `index` of LLM_MODELS."""
    config = current_config()
    if index == config.model_index and not (config.models[index].on_demand and on_demand.in_line(index)):
        on_demand.serving_here()
        return waking.awake_here(bool(streams)) if wakes else None
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
