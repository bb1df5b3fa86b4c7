"""`GET /v1/models` and `GET /v1/models/{id}`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from app.api.errors import ModelNotFoundError

bp = Blueprint("models", __name__)


def _model_object() -> dict[str, Any]:
    engine = current_app.extensions["engine"]
    return {
        "id": current_app.config["LLM"].model_id,
        "object": "model",
        "created": engine.created,
        "owned_by": "llama.cpp",
    }


@bp.get("/v1/models")
def list_models() -> Response:
    """The one model this server serves."""
    return jsonify({"object": "list", "data": [_model_object()]})


@bp.get("/v1/models/<path:model_id>")
def retrieve_model(model_id: str) -> Response:
    """The served model, by id."""
    if model_id != current_app.config["LLM"].model_id:
        raise ModelNotFoundError(f"The model '{model_id}' does not exist.", param="model")
    return jsonify(_model_object())
