"""What every endpoint with a body does first: check Accept, parse and validate the body, find the engine."""

from __future__ import annotations

from typing import Any, cast

from flask import abort, current_app, g, request
from marshmallow import Schema
from werkzeug.exceptions import BadRequest

from app.api.common import on_demand
from app.api.common.errors import (
    InvalidRequestError,
    ModelNotFoundError,
    NotAcceptableError,
    ServiceUnavailableError,
)
from app.engine.embedding_engine import EmbeddingEngine
from app.engine.engine import Engine
from app.engine.loading import LoadingEngine
from app.serving import relay
from app.settings.current import current_config

_OFFERED = ["application/json", "text/event-stream"]


def loaded_engine() -> LoadingEngine[Any]:
    """This worker's engine once its model has loaded (or a 503), whatever it serves."""
    engine: LoadingEngine[Any] = current_app.extensions["engine"]
    if not engine.wait_ready(timeout=current_config().timeout):
        raise ServiceUnavailableError("The model is not loaded yet; retry shortly.")
    return engine


def generating_engine() -> Engine:
    """This worker's engine, ready, where parse_body(use="generate") has let the request through."""
    return cast(Engine, loaded_engine())


def embedding_engine() -> EmbeddingEngine:
    """This worker's engine, ready, where parse_body(use="embed") has let the request through."""
    return cast(EmbeddingEngine, loaded_engine())


def parse_body(
    schema: Schema, use: str | None = "generate", keepalive_stream: bool = True, offered: list[str] = _OFFERED
) -> dict[str, Any]:
    """The JSON object body, validated by `schema`, for a model this worker holds.

    A body for a model another worker holds is relayed there (and this request answered
    with that worker's response); `use` ("generate", "embed" or None for either) is
    what the route needs the model for.
    """
    data = parse_json(schema, offered)
    config = current_config()
    index = model_index(data.get("model"), use)
    spec = config.models[index]
    if use == "generate" and spec.embedding:
        raise InvalidRequestError(
            f"The model '{spec.id}' is an embedding model: it answers /v1/embeddings only.", param="model"
        )
    if use == "embed" and not spec.embedding:
        raise InvalidRequestError(
            f"The model '{spec.id}' does not compute embeddings; serve one with \"embedding\": true "
            "in LLM_MODELS.",
            param="model",
        )
    # An SSE stream may wait for an on-demand load with keep-alives; other framings wait before the 200.
    serve_here_or_relay(index, data.get("stream") and keepalive_stream)
    return data


def parse_json(schema: Schema, offered: list[str] = _OFFERED) -> dict[str, Any]:
    """The JSON object body, validated by `schema` (for any worker: no model involved)."""
    check_accept(offered)
    try:
        body = request.get_json(force=True)
    except BadRequest:
        raise InvalidRequestError("The request body is not valid JSON.") from None
    except RecursionError:
        raise InvalidRequestError("The request body is nested too deeply.") from None
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    data: dict[str, Any] = schema.load(body)
    return data


def serve_here_or_relay(index: int, streams: object = False) -> None:
    """Return if this worker holds model `index`; else answer with the response of a worker that does
    (a request that `streams`, for a model loading on demand, with keep-alives meanwhile)."""
    config = current_config()
    if index == config.model_index:
        on_demand.serving_here()
        return
    if config.models[index].on_demand:
        relayed = on_demand.serve_on_demand(index, bool(streams))
        if relayed is None:
            return  # this pool worker has just loaded it
    else:
        relayed = relay.to_model_holder(request, index, config)
    if relayed is None:
        name = config.models[index].id
        raise ServiceUnavailableError(f"No worker holding '{name}' is ready; retry shortly.")
    g.stats.relayed = True  # the worker holding it logs and counts it
    abort(relayed)


def model_index(name: str | None, use: str | None = None) -> int:
    """Which entry of LLM_MODELS a request's `model` names (with none, the first that can serve `use`)."""
    served = current_config().models
    if name is None:
        fits = [i for i, spec in enumerate(served) if use is None or spec.embedding == (use == "embed")]
        return fits[0] if fits else 0
    for index, spec in enumerate(served):
        if spec.answers_to(name):
            return index
    ids = ", ".join(f"'{spec.id}'" for spec in served)
    raise ModelNotFoundError(f"The model '{name}' does not exist; this server serves {ids}.", param="model")


def check_accept(offered: list[str] = _OFFERED) -> None:
    """Refuse an Accept header that admits neither answer; the body's `stream` alone picks one."""
    if request.headers.get("Accept", "").strip() and not request.accept_mimetypes.best_match(offered):
        raise NotAcceptableError(
            "This endpoint answers application/json or text/event-stream; the Accept header admits neither."
        )
