"""The embeddings family in the OpenAPI document: its route, request and answer."""

from __future__ import annotations

from typing import Any

from app.api.embeddings.schemas import EmbeddingRequestSchema
from app.api.http.openapi import POST_ERRORS, Component, json_doc, operation

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


COMPONENTS: dict[str, Component] = {
    "EmbeddingList": EMBEDDING_LIST,
    "EmbeddingRequest": EmbeddingRequestSchema,
}


EMBED = operation(
    "Embed texts or token lists as unit vectors (models served with `embedding: true`)",
    json_doc("One vector per input, in input order.", "EmbeddingList"),
    POST_ERRORS,
    body="EmbeddingRequest",
)
