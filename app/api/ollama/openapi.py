"""Ollama's routes in the OpenAPI document: their bodies, answers (JSON, or NDJSON streams) and errors."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.http.openapi import error_responses, json_doc
from app.api.ollama.schemas import ChatSchema, EmbeddingsSchema, EmbedSchema, GenerateSchema, ShowSchema
from app.settings.models import ModelSpec

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


def _post(summary: str, request: str, answer: dict[str, Any], errors: dict[int, Any]) -> dict[str, Any]:
    body = {"required": True, "content": {"application/json": {"schema": request}}}
    return {"post": {"summary": summary, "requestBody": body, "responses": {200: answer, **errors}}}


def _get(summary: str, answer: dict[str, Any], errors: dict[int, Any]) -> dict[str, Any]:
    return {"get": {"summary": summary, "responses": {200: answer, **errors}}}


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
MANAGEMENT = (("/api/pull", "post"), ("/api/push", "post"), ("/api/create", "post"), ("/api/copy", "post"),
              ("/api/delete", "delete"))  # fmt: skip


def describe(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """The Ollama routes."""
    for name, schema in REQUESTS.items():
        spec.components.schema(name, schema=schema)
    # Ollama's clients must name a model: the served ones, by use (aliases and `:latest` work too).
    generating = [model.id for model in models if not model.embedding]
    embedding = [model.id for model in models if model.embedding]
    named = {"OllamaChatRequest": generating, "OllamaGenerateRequest": generating,
             "OllamaEmbedRequest": embedding, "OllamaEmbeddingsRequest": embedding,
             "OllamaShowRequest": generating + embedding}  # fmt: skip
    for name, ids in named.items():
        if ids:
            spec.components.schemas[name]["properties"]["model"]["enum"] = ids
    for name, component in ANSWERS.items():
        spec.components.schema(name, component=component)
    errors = error_responses(400, 401, 404, 406, 413, 429, 500, 503, schema="OllamaError")
    spec.path(
        path="/api/chat",
        operations=_post(
            "Answer a conversation (Ollama's)", "OllamaChatRequest", _streamed("OllamaChat"), errors
        ),
    )
    spec.path(
        path="/api/generate",
        operations=_post(
            "Continue a prompt (Ollama's)", "OllamaGenerateRequest", _streamed("OllamaGenerate"), errors
        ),
    )
    vectors = {**_object("model", "embeddings"), "properties": {"embeddings": {"type": "array"}}}
    spec.path(
        path="/api/embed",
        operations=_post(
            "Embed the input(s)", "OllamaEmbedRequest", json_doc("The vectors.", vectors), errors
        ),
    )
    vector = {**_object("embedding"), "properties": {"embedding": {"type": "array"}}}
    spec.path(
        path="/api/embeddings",
        operations=_post(
            "Embed a prompt (older)", "OllamaEmbeddingsRequest", json_doc("It.", vector), errors
        ),
    )
    shown = _object("template", "details", "model_info", "capabilities")
    show_errors = error_responses(400, 401, 404, 406, 413, schema="OllamaError")
    spec.path(
        path="/api/show",
        operations=_post(
            "A model's template and details", "OllamaShowRequest", json_doc("It.", shown), show_errors
        ),
    )
    listing = {**_object("models"), "properties": {"models": {"type": "array", "items": _LISTED}}}
    for path, summary in (("/api/tags", "The models served"), ("/api/ps", "The models loaded now")):
        spec.path(path=path, operations=_get(summary, json_doc("The models.", listing), error_responses(401)))
    versioned = {**_object("version"), "properties": {"version": {"type": "string"}}}
    spec.path(
        path="/api/version",
        operations=_get("The Ollama API version spoken", json_doc("It.", versioned), {}),
    )
    refused = error_responses(401, 501, schema="OllamaError")
    for path, method in MANAGEMENT:
        summary = "Model management: not here (models come from LLM_MODELS)"
        body = {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}
        operation = {"summary": summary, "requestBody": body, "responses": refused}
        spec.path(path=path, operations={method: operation})
