"""The token routes in the OpenAPI document: tokenize, detokenize, and a model's tokenizer facts."""

from __future__ import annotations

from typing import Any

from app.api.http.openapi import MODEL_QUERY, Component, json_doc, operation
from app.api.tokens.schemas import DetokenizeSchema, TokenizeSchema

_PIECE = {
    "type": "object",
    "description": "With `with_pieces`: the id and its text (or its bytes, when the piece is part of a "
    "character)",
    "required": ["id", "piece"],
    "properties": {
        "id": {"type": "integer"},
        "piece": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
    },
}
ANSWERS: dict[str, dict[str, Any]] = {
    "Tokens": {
        "type": "object",
        "required": ["tokens", "count", "max_model_len"],
        "properties": {
            "tokens": {"type": "array", "items": {"anyOf": [{"type": "integer"}, _PIECE]}},
            "count": {"type": "integer", "minimum": 0, "description": "How many tokens (vLLM's)"},
            "max_model_len": {
                "type": "integer",
                "minimum": 1,
                "description": "The context of one sequence, in tokens (vLLM's)",
            },
            "token_strs": {
                "type": "array",
                "items": {"type": "string"},
                "description": "With `return_token_strs`: each token as the vocabulary writes it (vLLM's)",
            },
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
}


COMPONENTS: dict[str, Component] = {
    **ANSWERS,
    "TokenizeRequest": TokenizeSchema,
    "DetokenizeRequest": DetokenizeSchema,
}


# Outside /v1, so no key's limits count them (no 429); keys protect them all the same.
_ERRORS = (400, 401, 404, 406, 413, 500, 503)
TOKENIZE = operation(
    "Text to token ids (llama.cpp server's `content`, or vLLM's `prompt`)",
    json_doc("The token ids.", "Tokens"),
    _ERRORS,
    body="TokenizeRequest",
)
DETOKENIZE = operation(
    "Token ids to text", json_doc("The text.", "DetokenizedText"), _ERRORS, body="DetokenizeRequest"
)
TOKENIZER_INFO = operation(
    "A model's special tokens and chat template (vLLM's endpoint)",
    json_doc("The tokenizer's facts.", "TokenizerInfo"),
    (401, 404, 500, 503),
    parameters=[MODEL_QUERY],
)
