"""`GET /v1/models`, `GET /v1/models/{id}` and the health checks."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from app.errors import ModelNotFoundError, ServiceUnavailableError

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


@bp.get("/health")
def health() -> Response:
    """Liveness: this worker's event loop answers, even while the model generates."""
    return jsonify({"status": "ok"})


@bp.get("/health/ready")
def ready() -> Response:
    """Readiness: 200 once this worker's model is loaded, 503 until then."""
    engine = current_app.extensions["engine"]
    if not engine.ready:
        detail = "failed to load (see the server log)" if engine.load_error else "loading"
        raise ServiceUnavailableError(f"The model is {detail}.")
    return jsonify({"status": "ok", "model": current_app.config["LLM"].model_id})
