"""The embeddings family in the OpenAPI document: its route, request and answer."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.embeddings.schemas import EmbeddingRequestSchema
from app.api.http.openapi import POST_ERRORS, json_doc, operation
from app.settings.models import ModelSpec

EMBEDDING_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["object", "data", "model", "usage"],
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["object", "index", "embedding"],
                "properties": {
                    "object": {"const": "embedding"},
                    "index": {"type": "integer", "minimum": 0},
                    "embedding": {
                        "anyOf": [
                            {"type": "array", "items": {"type": "number"}},
                            {"type": "string", "description": "Little-endian float32, base64"},
                        ]
                    },
                },
            },
        },
        "model": {"type": "string"},
        "usage": {
            "type": "object",
            "required": ["prompt_tokens", "total_tokens"],
            "properties": {
                "prompt_tokens": {"type": "integer", "minimum": 0},
                "total_tokens": {"type": "integer", "minimum": 0},
            },
        },
    },
}


def components(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """/v1/embeddings' request and answer."""
    spec.components.schema("EmbeddingList", component=EMBEDDING_LIST)
    spec.components.schema("EmbeddingRequest", schema=EmbeddingRequestSchema)


EMBED = operation(
    "Embed texts or token lists as unit vectors (models served with `embedding: true`)",
    json_doc("One vector per input, in input order.", "EmbeddingList"),
    POST_ERRORS,
    body="EmbeddingRequest",
)
