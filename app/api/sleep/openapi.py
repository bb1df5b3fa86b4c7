"""The sleep family in the OpenAPI document: vLLM's /sleep, /wake_up and /is_sleeping."""

from __future__ import annotations

from apispec import APISpec

from app.api.http.openapi import error_responses, json_doc
from app.settings.models import ModelSpec

_DONE = {"type": "object", "required": ["success"], "properties": {"success": {"const": True}}}
_SLEEPING = {
    "type": "object",
    "required": ["is_sleeping"],
    "properties": {"is_sleeping": {"type": "boolean", "description": "Every start-up worker's model sleeps"}},
}
_LEVEL = {
    "name": "level",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["1", "2"], "default": "1"},
    "description": "vLLM's sleep level; both free the weights and the KV cache here",
}


def describe(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """Operators' routes over every start-up worker (requests wake a sleeping model by themselves)."""
    spec.components.schema("SleepDone", component=_DONE)
    spec.components.schema("IsSleeping", component=_SLEEPING)
    spec.path(
        path="/sleep",
        operations={
            "post": {
                "summary": "Free every start-up model's weights and KV cache until a request or /wake_up",
                "parameters": [_LEVEL],
                "responses": {
                    200: json_doc("Every start-up worker's model sleeps.", "SleepDone"),
                    **error_responses(400, 401, 409, 503),
                },
            }
        },
    )
    spec.path(
        path="/wake_up",
        operations={
            "post": {
                "summary": "Load every sleeping start-up model again; answers once each is ready",
                "responses": {
                    200: json_doc("Every start-up worker's model is loaded.", "SleepDone"),
                    **error_responses(401, 503),
                },
            }
        },
    )
    spec.path(
        path="/is_sleeping",
        operations={
            "get": {
                "summary": "Whether the start-up models sleep (vLLM's)",
                "responses": {200: json_doc("The state.", "IsSleeping"), **error_responses(401, 503)},
            }
        },
    )
