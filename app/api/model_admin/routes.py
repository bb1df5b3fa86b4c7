"""`POST /models/load`, `POST /models/unload` (llama-server's router mode) and `/lora-adapters`.

Loading waits until a worker holds the model ready (as a request for it would); unloading
frees it from every pool worker holding it, unless one serves requests (a 409). Entries
loaded at start-up hold their workers for good: loading one is already done, unloading
one is refused. A relayed order (another worker's) acts on this worker itself.
"""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.http.openapi import documented
from app.api.http.roles import operator_route
from app.api.model_admin import openapi as doc
from app.api.model_admin import serving
from app.api.routing.front import routed

bp = Blueprint("model_admin", __name__)


@bp.post("/models/load")
@operator_route
@documented(doc.LOAD)
def load() -> Response:
    """Load an on-demand model (if no worker holds it); `{"success": true}` once it is ready."""
    return serving.loaded()


@bp.post("/models/unload")
@operator_route
@documented(doc.UNLOAD)
def unload() -> Response:
    """Unload an on-demand model from every worker holding it; a 409 if one serves requests."""
    return serving.unloaded()


@bp.get("/lora-adapters")
@documented(doc.ADAPTER_SCALES)
@routed(source="query", wakes=False, loads=False)
def list_adapters() -> Response:
    """llama-server's list of a model's LoRA adapters (`?model=`, else the first generating model):
    each with its index (`id`), name, path and global scale."""
    return serving.adapters_listed()


@bp.post("/lora-adapters")
@operator_route
@documented(doc.SET_SCALES)
def set_adapters() -> Response:
    """Set a model's global LoRA scales (llama-server's: a list of {id, scale}; those left out: 0),
    on every worker holding it."""
    return serving.scales_set()
