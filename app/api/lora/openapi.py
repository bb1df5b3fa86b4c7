"""The LoRA family in the OpenAPI document: vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter."""

from __future__ import annotations

from typing import Any

from app.api.http.openapi import Component, operation
from app.api.lora.schemas import LoadAdapterSchema, UnloadAdapterSchema


def _text(description: str) -> dict[str, Any]:
    """A 200 answered with vLLM's one-line text."""
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


COMPONENTS: dict[str, Component] = {
    "LoadLoraAdapter": LoadAdapterSchema,
    "UnloadLoraAdapter": UnloadAdapterSchema,
}


# Operators' routes: adapters named as models from then on, on every worker of their base model.
LOAD = operation(
    "Load a LoRA adapter GGUF (in LLM_LORA_DIRS) under a name requests use as `model`",
    _text("`Success: LoRA adapter '<name>' added successfully.`"),
    (400, 401, 403, 404, 503),
    body="LoadLoraAdapter",
)
UNLOAD = operation(
    "Unload a LoRA adapter (freed once no running request decodes with it)",
    _text("`Success: LoRA adapter '<name>' removed successfully.`"),
    (400, 401, 404),
    body="UnloadLoraAdapter",
)
