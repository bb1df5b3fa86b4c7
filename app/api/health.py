"""`GET /health` (liveness), `/health/ready` (readiness) and `/health/workers` (figures per worker)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from app.api.errors import ServiceUnavailableError
from app.api.models import ready_models
from app.serving import peers
from app.telemetry import worker_board

bp = Blueprint("health", __name__)

_COUNT = {"type": "integer", "minimum": 0}
# The answer of /health/workers, for the OpenAPI document.
WORKER_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["object", "window_seconds", "data"],
    "properties": {
        "object": {"const": "list"},
        "window_seconds": {"type": "integer", "description": "The span `tokens_last_minute` covers."},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "slot": _COUNT,
                    "pid": {"type": "integer"},
                    "model": {"type": ["string", "null"], "description": "The id of the model it holds"},
                    "ready": {"type": "boolean", "description": "Its model has loaded"},
                    "sequences": {**_COUNT, "description": "Choices it can generate at once"},
                    "running": {**_COUNT, "description": "Choices holding a sequence now"},
                    "waiting": {**_COUNT, "description": "Choices queued for a sequence"},
                    "generating": {"type": "boolean"},
                    "greenlets": {**_COUNT, "description": "Live greenlets, counted every 5 seconds"},
                    "tokens_last_minute": _COUNT,
                    "tokens_per_second": {"type": "number", "minimum": 0},
                },
            },
        },
    },
}


@bp.get("/health")
def health() -> Response:
    """Liveness: this worker's event loop answers, even while the model generates."""
    return jsonify({"status": "ok"})


@bp.get("/health/ready")
def ready() -> Response:
    """Readiness: 200 once this worker's model is loaded and every served model has a ready worker."""
    engine = current_app.extensions["engine"]
    if not engine.ready:
        detail = "failed to load (see the server log)" if engine.load_error else "loading"
        raise ServiceUnavailableError(f"The model is {detail}.")
    config = current_app.config["LLM"]
    missing = [spec.id for index, spec in enumerate(config.models) if index not in ready_models()]
    if missing:
        raise ServiceUnavailableError(f"No worker has {', '.join(missing)} ready yet.")
    return jsonify({"status": "ok", "model": config.model_id})


@bp.get("/health/workers")
def workers() -> Response:
    """Each gunicorn worker: its model, whether it generates, its queue and its tokens per second."""
    models = current_app.config["LLM"].models
    listed: list[dict[str, Any]] = []
    if peers.table is not None and worker_board.board is not None:  # none outside gunicorn
        for peer in peers.table.peers():
            if not peer.live:
                continue  # being forked: nothing to show yet
            figures = worker_board.board.read(peer.slot)
            listed.append(
                {
                    "slot": peer.slot,
                    "pid": peer.pid,
                    "model": models[peer.model].id if peer.model < len(models) else None,
                    "ready": peer.ready,
                    "sequences": peer.capacity,
                    "running": figures.running,
                    "waiting": figures.waiting,
                    "generating": figures.running > 0,
                    "greenlets": figures.greenlets,
                    "tokens_last_minute": figures.tokens_last_minute,
                    "tokens_per_second": figures.tokens_per_second,
                }
            )
    return jsonify({"object": "list", "window_seconds": worker_board.WINDOW, "data": listed})
