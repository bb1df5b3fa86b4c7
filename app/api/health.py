"""`GET /health` (liveness) and `GET /health/ready` (readiness)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from app.api.errors import ServiceUnavailableError
from app.api.models import ready_models

bp = Blueprint("health", __name__)


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
