"""What every generating endpoint does first: check Accept, parse and validate the body, find the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import current_app, request
from marshmallow import Schema
from werkzeug.exceptions import BadRequest

from app.api.errors import (
    InvalidRequestError,
    ModelNotFoundError,
    NotAcceptableError,
    ServiceUnavailableError,
)

if TYPE_CHECKING:
    from app.engine.engine import Engine

_OFFERED = ["application/json", "text/event-stream"]


def engine() -> Engine:
    """This worker's engine, ready to generate (or a 503)."""
    the_engine: Engine = current_app.extensions["engine"]
    if not the_engine.wait_ready(timeout=current_app.config["LLM"].timeout):
        raise ServiceUnavailableError("The model is not loaded yet; retry shortly.")
    return the_engine


def parse_body(schema: Schema) -> dict[str, Any]:
    """The JSON object body, validated by `schema`, and naming the served model."""
    check_accept()
    try:
        body = request.get_json(force=True)
    except BadRequest:
        raise InvalidRequestError("The request body is not valid JSON.") from None
    except RecursionError:
        raise InvalidRequestError("The request body is nested too deeply.") from None
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    data: dict[str, Any] = schema.load(body)
    served = current_app.config["LLM"].model_id
    if data.get("model") not in (None, served):
        raise ModelNotFoundError(
            f"The model '{data['model']}' does not exist; this server serves '{served}'.",
            param="model",
        )
    return data


def check_accept() -> None:
    """Refuse an Accept header that admits neither answer; the body's `stream` alone picks one."""
    if request.headers.get("Accept", "").strip() and not request.accept_mimetypes.best_match(_OFFERED):
        raise NotAcceptableError(
            "This endpoint answers application/json or text/event-stream; the Accept header admits neither."
        )
