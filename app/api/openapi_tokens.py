"""OpenAPI for the routes that do not generate: embeddings, tokenizing, and a chat prompt's size."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.embeddings import EmbeddingRequestSchema
from app.api.tokenize import DetokenizeSchema, TokenizeSchema

_ERRORS = {
    400: "Invalid request (`param` names the field), or an input longer than the context "
    "(`code: context_length_exceeded`), or a model of the wrong kind for the route.",
    401: "Missing or wrong API key.",
    404: "No such model (`code: model_not_found`).",
    406: "The Accept header does not admit application/json.",
    413: "The request body is larger than LLM_MAX_BODY_BYTES.",
    429: "The API key is over one of its limits (`code: rate_limit_exceeded`); retry after `Retry-After`.",
    500: "An unexpected server error (details are in the server log).",
    503: "The model is not loaded yet, or no worker holding it is ready.",
}

_ANSWERS: dict[str, dict[str, Any]] = {
    "EmbeddingList": {
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
    },
    "Tokens": {
        "type": "object",
        "required": ["tokens"],
        "properties": {
            "tokens": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"type": "integer"},
                        {
                            "type": "object",
                            "description": "With `with_pieces`: the id and its text (or its bytes, "
                            "when the piece is part of a character)",
                            "required": ["id", "piece"],
                            "properties": {
                                "id": {"type": "integer"},
                                "piece": {
                                    "anyOf": [
                                        {"type": "string"},
                                        {"type": "array", "items": {"type": "integer"}},
                                    ]
                                },
                            },
                        },
                    ]
                },
            }
        },
    },
    "DetokenizedText": {
        "type": "object",
        "required": ["content", "prompt"],
        "properties": {"content": {"type": "string"}, "prompt": {"type": "string"}},
    },
    "TokenizerInfo": {
        "type": "object",
        "required": ["model", "bos_token", "eos_token", "chat_template", "vocabulary_size"],
        "properties": {
            "model": {"type": "string"},
            "bos_token": {"type": ["string", "null"]},
            "eos_token": {"type": ["string", "null"]},
            "pad_token": {"type": ["string", "null"]},
            "chat_template": {"type": ["string", "null"]},
            "vocabulary_size": {"type": "integer", "minimum": 1},
        },
    },
    "ChatInputTokens": {
        "type": "object",
        "required": ["object", "input_tokens"],
        "properties": {
            "object": {"const": "chat.completion.input_tokens"},
            "input_tokens": {"type": "integer", "minimum": 0},
        },
    },
}


def _errors(*statuses: int) -> dict[int, Any]:
    return {
        status: {"description": _ERRORS[status], "content": {"application/json": {"schema": "Error"}}}
        for status in statuses
    }


def _answer(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _post(summary: str, request: str, answer: dict[str, Any], limited: bool = True) -> dict[str, Any]:
    """A POST operation; `limited`: under /v1, so counted against the key's limits (429)."""
    statuses = (400, 401, 404, 406, 413, *((429,) if limited else ()), 500, 503)
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
            "responses": {200: answer, **_errors(*statuses)},
        }
    }


def add_paths(spec: APISpec) -> None:
    """The five routes, their requests and answers."""
    for name, schema in _ANSWERS.items():
        spec.components.schema(name, component=schema)
    spec.components.schema("EmbeddingRequest", schema=EmbeddingRequestSchema)
    spec.components.schema("TokenizeRequest", schema=TokenizeSchema)
    spec.components.schema("DetokenizeRequest", schema=DetokenizeSchema)
    spec.path(
        path="/v1/embeddings",
        operations=_post(
            "Embed texts or token lists as unit vectors (models served with `embedding: true`)",
            "EmbeddingRequest",
            _answer("One vector per input, in input order.", "EmbeddingList"),
        ),
    )
    spec.path(
        path="/tokenize",
        operations=_post(
            "Text to token ids (llama.cpp server's `content`, or vLLM's `prompt`)",
            "TokenizeRequest",
            _answer("The token ids.", "Tokens"),
            limited=False,
        ),
    )
    spec.path(
        path="/detokenize",
        operations=_post(
            "Token ids to text", "DetokenizeRequest", _answer("The text.", "DetokenizedText"), limited=False
        ),
    )
    spec.path(
        path="/v1/chat/completions/input_tokens",
        operations=_post(
            "Count a chat request's prompt tokens after the chat template (tools included)",
            "ChatCompletionRequest",
            _answer("The count.", "ChatInputTokens"),
        ),
    )
    model = {"name": "model", "in": "query", "required": False, "schema": {"type": "string"}}
    spec.path(
        path="/tokenizer_info",
        operations={
            "get": {
                "summary": "A model's special tokens and chat template (vLLM's endpoint)",
                "parameters": [model],
                "responses": {
                    200: _answer("The tokenizer's facts.", "TokenizerInfo"),
                    **_errors(401, 404, 500, 503),
                },
            }
        },
    )
