"""What every endpoint with a body does first: check Accept, parse and validate the body, find the engine."""

from __future__ import annotations

import re
from typing import Any, TypeVar, cast

from flask import current_app, request
from marshmallow import Schema
from werkzeug.exceptions import BadRequest

from app.api.http.errors import (
    InvalidRequestError,
    ModelNotFoundError,
    NotAcceptableError,
    ServiceUnavailableError,
)
from app.engine.embedding_engine import EmbeddingEngine
from app.engine.engine import Engine
from app.engine.loading import LoadingEngine
from app.serving import routing
from app.settings.current import current_config

_OFFERED = ["application/json", "text/event-stream"]
T = TypeVar("T")


def loaded_engine() -> LoadingEngine[Any]:
    """This worker's engine once its model has loaded (or a 503), whatever it serves."""
    engine: LoadingEngine[Any] = current_app.extensions["engine"]
    sleeper = current_app.extensions.get("sleeper")
    if sleeper is not None and sleeper.asleep:  # a read that does not wake it (those that do, woke it)
        raise ServiceUnavailableError(
            "The model is asleep: a request that generates wakes it (or an operator's POST /wake_up).",
            code="model_asleep",
        )
    if not engine.wait_ready(timeout=current_config().timeout):
        raise ServiceUnavailableError("The model is not loaded yet; retry shortly.")
    return engine


def generating_engine() -> Engine:
    """This worker's engine, ready, once the request is routed here for a generating model."""
    return cast(Engine, loaded_engine())


def embedding_engine() -> EmbeddingEngine:
    """This worker's engine, ready, once the request is routed here for an embedding model."""
    return cast(EmbeddingEngine, loaded_engine())


def vector_engine() -> EmbeddingEngine:
    """This worker's embedding engine, for vectors: a reranker's rank pooling makes one score per
    input, which is no embedding (llama-server refuses it on its embedding routes too)."""
    engine = embedding_engine()
    if engine.ranks:
        raise InvalidRequestError(
            f"The model '{current_config().model_id}' is a reranker: it scores documents against a "
            "query at /v1/rerank and computes no embeddings.",
            param="model",
        )
    return engine


def parse_body(schema: Schema, use: str | None = "generate", offered: list[str] = _OFFERED) -> dict[str, Any]:
    """The JSON object body, validated by `schema`, naming a served model that can do what the route
    does (`use`: "generate", "embed" or None for either). Which worker serves it is the view's
    next question (api/routing/route.py)."""
    data = parse_json(schema, offered)
    check_model(data.get("model"), use)
    return data


def parse_request(
    schema: Schema, kind: type[T], use: str | None = "generate", offered: list[str] = _OFFERED
) -> T:
    """As parse_body, for a schema that loads a typed request (`kind`, with its `model`)."""
    typed = load_request(schema, kind, offered)
    check_model(getattr(typed, "model", None), use)
    return typed


def load_request(schema: Schema, kind: type[T], offered: list[str] = _OFFERED) -> T:
    """The typed request `schema` loads from the JSON object body, its model not yet looked at."""
    check_accept(offered)
    typed = schema.load(_json_object())
    assert isinstance(typed, kind), f"{type(schema).__name__} loads a {kind.__name__}"
    return typed


def form_parts() -> dict[str, list[str]]:
    """A multipart request's form fields (each with its values), once every part is named: werkzeug
    keys a part whose Content-Disposition names no field by None."""
    form = request.form.to_dict(flat=False)
    if not all(isinstance(key, str) and key for key in [*form, *request.files]):
        raise InvalidRequestError("Every part of the multipart form needs a name (Content-Disposition).")
    return form


def check_model(name: str | None, use: str | None) -> None:
    """Refuse a model this server does not serve, or one that cannot do what the route does."""
    spec = current_config().models[model_index(name, use)]
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


def parse_json(schema: Schema, offered: list[str] = _OFFERED) -> dict[str, Any]:
    """The JSON object body, validated by `schema` (for any worker: no model involved)."""
    check_accept(offered)
    data: dict[str, Any] = schema.load(_json_object())
    return data


def _json_object() -> dict[str, Any]:
    body = _json_body()
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    return body


def json_array(what: str) -> list[Any]:
    """A body that is a JSON array (llama-server's /lora-adapters takes one), of `what`."""
    check_accept()
    body = _json_body()
    if not isinstance(body, list):
        raise InvalidRequestError(f"The request body must be a JSON array of {what}.")
    return body


def _json_body() -> Any:
    try:
        body = request.get_json(force=True)
    except BadRequest:
        raise InvalidRequestError("The request body is not valid JSON.") from None
    except RecursionError:
        raise InvalidRequestError("The request body is nested too deeply.") from None
    _check_scalar_values(body)
    return body


# A surrogate written as an escape (\ud83d), paired or not: JSON's only way to put one in a string.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _check_scalar_values(body: Any) -> None:
    """Refuse a body whose strings hold a lone surrogate (`"\\ud800"` alone), naming the field: no
    Unicode text holds one, no tokenizer can take it, and llama-server refuses it as invalid JSON.
    Only a body that writes a surrogate escape at all is walked."""
    if not _SURROGATE_ESCAPE.search(request.get_data(cache=True)):
        return
    pending: list[tuple[str, Any]] = [("", body)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, str) and not _encodes(value):
            named = f"{where}: " if where else ""
            raise InvalidRequestError(
                f"{named}not valid text: it holds a lone surrogate (\\uD800-\\uDFFF without its pair).",
                param=where or None,
            )
        if isinstance(value, dict):
            for key, item in reversed(value.items()):
                if not _encodes(key):
                    raise InvalidRequestError("A key of the request body holds a lone surrogate.")
                pending.append((f"{where}.{key}" if where else key, item))
        elif isinstance(value, list):
            pending.extend((f"{where}[{n}]", item) for n, item in reversed(list(enumerate(value))))


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def model_index(name: str | None, use: str | None = None) -> int:
    """Which entry of LLM_MODELS a request's `model` names (with none, the first that can serve `use`)."""
    served = current_config().models
    if name is None:
        return routing.first_fitting(
            [spec.embedding for spec in served], None if use is None else use == "embed"
        )
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
