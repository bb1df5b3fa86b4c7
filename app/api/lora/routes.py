"""`POST /v1/load_lora_adapter`, `POST /v1/unload_lora_adapter` (vLLM's): adapters as models, at run time.

A load is checked where the base model is held (relayed there, as a request for it would
be): the file must lie in LLM_LORA_DIRS, and llama.cpp must load it as an adapter of that
model, else a 400 naming it. It is then written to the server's adapter file
(app/serving/runtime_adapters.py), so every worker of the model serves it (each loads it
before its next request) and a worker started later loads it too. An unload is written
there as well; each worker frees the adapter once no running request decodes with it.
"""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.http.openapi import documented
from app.api.http.roles import operator_route
from app.api.lora import openapi as doc
from app.api.lora import serving
from app.api.routing.front import routed

bp = Blueprint("lora", __name__)


@bp.post("/v1/load_lora_adapter")
@operator_route
@documented(doc.LOAD)
@routed()
def load_adapter() -> Response:
    """Load a LoRA adapter file under `lora_name`, on every worker of the base model (`model`)."""
    return serving.loaded()


@bp.post("/v1/unload_lora_adapter")
@operator_route
@documented(doc.UNLOAD)
def unload_adapter() -> Response:
    """Unload the LoRA adapter named `lora_name` (loaded at run time or by LLM_MODELS) from its model."""
    return serving.unloaded()
