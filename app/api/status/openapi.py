"""The server's own routes in the OpenAPI document: its models, its health and per-worker figures."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate

from app.api.generation.memory_view import MEMORY_SCHEMA, SPECULATIVE_PROPERTIES
from app.api.http.openapi import Component, json_doc, operation
from app.settings.model_entries import KV_TYPES


class ModelStatusSchema(Schema):
    value = fields.String(
        required=True,
        validate=validate.OneOf(["loaded", "loading", "unloaded"]),
        metadata={"description": "llama-server's router states: a worker serves it, loads it, or none does"},
    )


class HolderSchema(Schema):
    slot = fields.Integer(required=True)
    pid = fields.Integer(required=True)
    ready = fields.Boolean(required=True)
    asleep = fields.Boolean(
        required=True, metadata={"description": "Its model sleeps (weights freed): a request wakes it"}
    )


class ModelSchema(Schema):
    id = fields.String(required=True)
    object = fields.String(required=True, validate=validate.Equal("model"))
    created = fields.Integer(required=True)
    owned_by = fields.String(required=True)
    ready = fields.Boolean(required=True, metadata={"description": "A worker holding it has loaded it"})
    kind = fields.String(required=True, validate=validate.OneOf(["generation", "embedding"]))
    aliases = fields.List(
        fields.String(), required=True, metadata={"description": "Other ids requests may name it by"}
    )
    load_ = fields.String(  # named so as not to hide Schema.load
        data_key="load",
        required=True,
        validate=validate.OneOf(["startup", "on_demand"]),
        metadata={"description": "At start-up on workers of its own, or by a pool worker when asked for"},
    )
    ttl = fields.Integer(
        required=True, allow_none=True, metadata={"description": "On demand: seconds idle before it unloads"}
    )
    status = fields.Nested(ModelStatusSchema, required=True)
    workers = fields.List(fields.Nested(HolderSchema), required=True)
    modalities = fields.Dict(
        keys=fields.String(),
        values=fields.Boolean(),
        required=True,
        metadata={"description": "What it takes in besides text, from its projector: vision, audio"},
    )
    parent = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "A LoRA adapter served as a model: its base model's id (vLLM's)"},
    )
    root = fields.String(required=True, metadata={"description": "Its GGUF file (an adapter: its own)"})
    max_model_len = fields.Integer(
        required=True, metadata={"description": "A request's context window, prompt and answer (vLLM's name)"}
    )
    context_length = fields.Integer(required=True, metadata={"description": "The same window (LM Studio's)"})
    n_ctx = fields.Integer(required=True, metadata={"description": "The same window (llama-server's)"})
    max_input_tokens = fields.Integer(
        required=True, metadata={"description": "The same window (Anthropic's)"}
    )
    max_tokens = fields.Integer(
        required=True, metadata={"description": "The largest max_tokens a request may ask (Anthropic's)"}
    )
    type = fields.String(
        required=True, validate=validate.Equal("model"), metadata={"description": "Anthropic's"}
    )
    display_name = fields.String(required=True, metadata={"description": "Anthropic's: its id"})
    created_at = fields.String(required=True, metadata={"description": "Anthropic's: `created`, as RFC 3339"})


class ModelListSchema(Schema):
    object = fields.String(required=True, validate=validate.Equal("list"))
    data = fields.List(fields.Nested(ModelSchema), required=True)
    has_more = fields.Boolean(required=True, metadata={"description": "Anthropic's paging: always false"})
    first_id = fields.String(required=True, allow_none=True)
    last_id = fields.String(required=True, allow_none=True)


class HealthSchema(Schema):
    status = fields.String(required=True, validate=validate.Equal("ok"))
    model = fields.String(allow_none=True, metadata={"description": "This worker's model (none: pool)"})


_COUNT = {"type": "integer", "minimum": 0}
WORKER_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["object", "window_seconds", "data"],
    "properties": {
        "object": {"const": "list"},
        "window_seconds": {"type": "integer", "description": "The span `tokens_last_minute` covers."},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "slot": _COUNT,
                    "pid": {"type": "integer"},
                    "model": {"type": ["string", "null"], "description": "The id of the model it holds"},
                    "ready": {"type": "boolean", "description": "Its model has loaded"},
                    "asleep": {"type": "boolean", "description": "Its start-up model sleeps (weights freed)"},
                    "on_demand": {"type": "boolean", "description": "A pool worker (on-demand models)"},
                    "idle_seconds": {
                        "type": ["number", "null"],
                        "description": "A pool worker's model: seconds since it last served (ttl, eviction)",
                    },
                    "load_seconds": {
                        "type": ["number", "null"],
                        "description": "How long its (last) model took to load",
                    },
                    "sequences": {**_COUNT, "description": "Choices it can generate at once"},
                    "running": {**_COUNT, "description": "Choices holding a sequence now"},
                    "waiting": {**_COUNT, "description": "Choices queued for a sequence"},
                    "generating": {"type": "boolean"},
                    "greenlets": {**_COUNT, "description": "Live greenlets, counted every 5 seconds"},
                    "greenlets_counted_at": {
                        "type": "number",
                        "description": "When `greenlets` was counted (Unix time; 0 before the first count)",
                    },
                    "tokens_last_minute": _COUNT,
                    "tokens_per_second": {"type": "number", "minimum": 0},
                    "kv_cache": {
                        "type": ["object", "null"],
                        "description": "Its KV cache (null until loaded, or for an embedding model)",
                        "required": ["cells", "type_k", "type_v", "bytes", "bytes_per_sequence"],
                        "properties": {
                            "cells": _COUNT,
                            "type_k": {"enum": list(KV_TYPES), "description": "LLM_CACHE_TYPE_K"},
                            "type_v": {"enum": list(KV_TYPES), "description": "LLM_CACHE_TYPE_V"},
                            "bytes": _COUNT,
                            "bytes_per_sequence": {**_COUNT, "description": "A whole context's cells"},
                        },
                    },
                    "memory": MEMORY_SCHEMA,
                    "speculative": {
                        "type": ["object", "null"],
                        "description": "Speculative decoding since the worker started (null: embeddings)",
                        "required": ["type", "enabled", "draft_tokens", "accepted_tokens", "acceptance_rate"],
                        "properties": {
                            **SPECULATIVE_PROPERTIES,
                            "draft_tokens": {**_COUNT, "description": "Draft tokens verified"},
                            "accepted_tokens": {**_COUNT, "description": "Draft tokens kept"},
                            "acceptance_rate": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                        },
                    },
                },
            },
        },
    },
}


COMPONENTS: dict[str, Component] = {
    "Model": ModelSchema,
    "ModelList": ModelListSchema,
    "Health": HealthSchema,
    "WorkerList": WORKER_LIST,
}


MODELS = operation("The models this server serves", json_doc("The list of models.", "ModelList"), (401,))
MODEL = operation("A served model, by id", json_doc("The model.", "Model"), (401, 404))
LIVE = operation(
    "Liveness: answers at once, even while the model generates or the server drains",
    json_doc("Alive.", "Health"),
)
READY = operation(
    "Readiness: 200 once a worker holding each model has loaded it; 503 while loading or draining",
    json_doc("Ready.", "Health"),
    (503,),
)
WORKERS = operation(
    "Each gunicorn worker: its model, busy sequences, queue and tokens per second",
    json_doc("Every live worker.", "WorkerList"),
    (401,),
)
