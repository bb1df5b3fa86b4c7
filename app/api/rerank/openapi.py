"""The rerank family in the OpenAPI document: its request and answer (llama-server's four paths)."""

from __future__ import annotations

from typing import Any

from app.api.http.openapi import POST_ERRORS, Component, json_doc, operation
from app.api.rerank.schemas import RerankRequestSchema

_COUNT = {"type": "integer", "minimum": 0}
RERANK_RESULT: dict[str, Any] = {
    "type": "object",
    "required": ["model", "object", "usage", "results"],
    "properties": {
        "model": {"type": "string"},
        "object": {"const": "list"},
        "usage": {
            "type": "object",
            "required": ["prompt_tokens", "total_tokens"],
            "properties": {"prompt_tokens": _COUNT, "total_tokens": _COUNT},
        },
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "relevance_score"],
                "properties": {
                    "index": _COUNT,
                    "relevance_score": {"type": "number"},
                    "document": {"type": "object", "properties": {"text": {"type": "string"}}},
                },
            },
        },
    },
}


COMPONENTS: dict[str, Component] = {"RerankResult": RERANK_RESULT, "RerankRequest": RerankRequestSchema}


RERANK = operation(
    "Rank documents by relevance to a query (a reranking model: pooling rank)",
    json_doc("The documents, most relevant first, `top_n` of them.", "RerankResult"),
    POST_ERRORS,
    body="RerankRequest",
)
