"""Ollama's routes in the OpenAPI document: their bodies, answers (JSON, or NDJSON streams) and errors."""

from __future__ import annotations

from typing import Any

from app.api.http.openapi import Component, json_doc, operation
from app.api.ollama.schemas import ChatSchema, EmbeddingsSchema, EmbedSchema, GenerateSchema, ShowSchema

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
_NS = {"type": "integer", "minimum": 0, "description": "Nanoseconds"}
_DONE = {
    "done": {"type": "boolean"},
    "done_reason": {
        "enum": ["stop", "length", "load", "unload"],
        "description": "load / unload: the answer to a request with nothing to answer (Ollama's idiom)",
    },
    "total_duration": _NS,
    "load_duration": _NS,
    "prompt_eval_count": {"type": "integer"},
    "prompt_eval_duration": _NS,
    "eval_count": {"type": "integer"},
    "eval_duration": _NS,
}
_CALL = {
    "type": "object",
    "properties": {
        "function": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
        },
    },
}
CHAT_ANSWER: dict[str, Any] = {
    "type": "object",
    "required": ["model", "created_at", "message", "done"],
    "properties": {
        "model": {"type": "string"},
        "created_at": {"type": "string"},
        "message": {
            "type": "object",
            "required": ["role", "content"],
            "properties": {
                "role": {"const": "assistant"},
                "content": {"type": "string"},
                "thinking": {"type": "string"},
                "tool_calls": {"type": "array", "items": _CALL},
            },
        },
        **_DONE,
    },
}
GENERATE_ANSWER: dict[str, Any] = {
    "type": "object",
    "required": ["model", "created_at", "response", "done"],
    "properties": {
        "model": {"type": "string"},
        "created_at": {"type": "string"},
        "response": {"type": "string"},
        "thinking": {"type": "string"},
        **_DONE,
    },
}
_DETAILS = {"type": "object", "properties": {"format": {"type": "string"}, "family": {"type": "string"}}}
_LISTED = {
    "type": "object",
    "required": ["name", "model", "size", "digest", "details"],
    "properties": {
        "name": {"type": "string"},
        "model": {"type": "string"},
        "size": {"type": "integer"},
        "digest": {"type": "string"},
        "modified_at": {"type": "string"},
        "details": _DETAILS,
    },
}
_OBJECT = {"type": "object"}
STREAMED = (
    "With `stream: false`, one JSON object. Otherwise (Ollama's default) `application/x-ndjson`: one "
    "object per line, each `done: false` with a piece of the answer, the last `done: true` with "
    'the durations; an error after the 200 is a line `{"error": "..."}`.'
)


def _streamed(name: str) -> dict[str, Any]:
    content = {"application/json": {"schema": name}, "application/x-ndjson": {"schema": name}}
    return {"description": STREAMED, "content": content}


def _object(*required: str) -> dict[str, Any]:
    return {"type": "object", "required": list(required)}


REQUESTS = {
    "OllamaChatRequest": ChatSchema,
    "OllamaGenerateRequest": GenerateSchema,
    "OllamaEmbedRequest": EmbedSchema,
    "OllamaEmbeddingsRequest": EmbeddingsSchema,
    "OllamaShowRequest": ShowSchema,
}
ANSWERS = {"OllamaError": _ERROR, "OllamaChat": CHAT_ANSWER, "OllamaGenerate": GENERATE_ANSWER}


COMPONENTS: dict[str, Component] = {**REQUESTS, **ANSWERS}
# Ollama's clients must name a model: the served ones, by use (aliases and `:latest` work too).
MODEL_NAMES = {
    "OllamaChatRequest": "generate",
    "OllamaGenerateRequest": "generate",
    "OllamaEmbedRequest": "embed",
    "OllamaEmbeddingsRequest": "embed",
    "OllamaShowRequest": "any",
}


_ERRORS = (400, 401, 404, 406, 413, 429, 500, 503)
_VECTORS = {**_object("model", "embeddings"), "properties": {"embeddings": {"type": "array"}}}
_VECTOR = {**_object("embedding"), "properties": {"embedding": {"type": "array"}}}
_LISTING = {**_object("models"), "properties": {"models": {"type": "array", "items": _LISTED}}}


def _ollama(
    summary: str, answer: dict[str, Any] | None, errors: tuple[int, ...], body: str | None = None
) -> Any:
    return operation(summary, answer, errors, body=body, error_schema="OllamaError")


CHAT = _ollama("Answer a conversation (Ollama's)", _streamed("OllamaChat"), _ERRORS, "OllamaChatRequest")
GENERATE = _ollama(
    "Continue a prompt (Ollama's)", _streamed("OllamaGenerate"), _ERRORS, "OllamaGenerateRequest"
)
EMBED = _ollama("Embed the input(s)", json_doc("The vectors.", _VECTORS), _ERRORS, "OllamaEmbedRequest")
EMBEDDINGS = _ollama("Embed a prompt (older)", json_doc("It.", _VECTOR), _ERRORS, "OllamaEmbeddingsRequest")
SHOW = _ollama(
    "A model's template and details",
    json_doc("It.", _object("template", "details", "model_info", "capabilities")),
    (400, 401, 404, 406, 413),
    "OllamaShowRequest",
)
TAGS = operation("The models served", json_doc("The models.", _LISTING), (401,))
PS = operation("The models loaded now", json_doc("The models.", _LISTING), (401,))
VERSION = operation(
    "The Ollama API version spoken",
    json_doc("It.", {**_object("version"), "properties": {"version": {"type": "string"}}}),
)
MANAGED = _ollama("Model management: not here (models come from LLM_MODELS)", None, (401, 501)) | {
    "requestBody": {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}
}
ROOT = operation(
    "Whether the server runs, as Ollama answers its clients' check",
    {"description": "`Ollama is running`", "content": {"text/plain": {"schema": {"type": "string"}}}},
)
