"""What the server serves and how it fares: /v1/models, /health, /health/ready and /health/workers."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.http.openapi import documented
from app.api.status import openapi as doc
from app.api.status import serving

bp = Blueprint("status", __name__)


@bp.get("/v1/models")
@documented(doc.MODELS)
def list_models() -> Response:
    """Every model this server serves, with its state and the workers holding it."""
    return serving.models_listed()


@bp.get("/v1/models/<path:model_id>")
@documented(doc.MODEL)
def retrieve_model(model_id: str) -> Response:
    """One served model (or LoRA adapter served as a model), by id."""
    return serving.model_found(model_id)


@bp.get("/health")
@documented(doc.LIVE)
def health() -> Response:
    """Liveness: this worker's event loop answers, even while the model generates."""
    return jsonify({"status": "ok"})


@bp.get("/health/ready")
@documented(doc.READY)
def ready() -> Response:
    """Readiness: 200 once this worker's model is loaded and every served model has a ready worker."""
    return serving.readiness()


@bp.get("/health/workers")
@documented(doc.WORKERS)
def workers() -> Response:
    """Each gunicorn worker: its model, whether it generates, its queue and its tokens per second."""
    return serving.workers_listed()
