"""`GET /v1/models` and `GET /v1/models/{id}`: every served model, and whether a worker has it ready."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from app.api.errors import ModelNotFoundError
from app.serving import peers

bp = Blueprint("models", __name__)


def ready_models() -> set[int]:
    """The entries of LLM_MODELS that at least one ready worker holds."""
    if peers.this_worker is None:  # one process (tests with Flask's client): this engine alone
        engine = current_app.extensions["engine"]
        return {current_app.config["LLM"].model_index} if engine.ready else set()
    return {peer.model for peer in peers.this_worker.table.peers() if peer.live and peer.ready}


def _model_object(index: int, ready: set[int]) -> dict[str, Any]:
    spec = current_app.config["LLM"].models[index]
    return {
        "id": spec.id,
        "object": "model",
        "created": current_app.extensions["engine"].created,
        "owned_by": "llama.cpp",
        "ready": index in ready,
        "kind": "embedding" if spec.embedding else "generation",
    }


@bp.get("/v1/models")
def list_models() -> Response:
    """Every model this server serves."""
    ready = ready_models()
    count = len(current_app.config["LLM"].models)
    return jsonify({"object": "list", "data": [_model_object(index, ready) for index in range(count)]})


@bp.get("/v1/models/<path:model_id>")
def retrieve_model(model_id: str) -> Response:
    """One served model, by id."""
    for index, spec in enumerate(current_app.config["LLM"].models):
        if spec.id == model_id:
            return jsonify(_model_object(index, ready_models()))
    raise ModelNotFoundError(f"The model '{model_id}' does not exist.", param="model")
