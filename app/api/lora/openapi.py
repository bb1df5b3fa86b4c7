"""The LoRA family in the OpenAPI document: vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.http.openapi import error_responses, post
from app.api.lora.schemas import LoadAdapterSchema, UnloadAdapterSchema
from app.settings.models import ModelSpec


def _text(description: str) -> dict[str, Any]:
    """A 200 answered with vLLM's one-line text."""
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


def describe(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """Operators' routes: adapters named as models from then on, on every worker of their base model."""
    spec.components.schema("LoadLoraAdapter", schema=LoadAdapterSchema)
    spec.components.schema("UnloadLoraAdapter", schema=UnloadAdapterSchema)
    spec.path(
        path="/v1/load_lora_adapter",
        operations=post(
            "Load a LoRA adapter GGUF (in LLM_LORA_DIRS) under a name requests use as `model`",
            "LoadLoraAdapter",
            _text("`Success: LoRA adapter '<name>' added successfully.`"),
            error_responses(400, 401, 403, 404, 503),
        ),
    )
    spec.path(
        path="/v1/unload_lora_adapter",
        operations=post(
            "Unload a LoRA adapter (freed once no running request decodes with it)",
            "UnloadLoraAdapter",
            _text("`Success: LoRA adapter '<name>' removed successfully.`"),
            error_responses(400, 401, 404),
        ),
    )
