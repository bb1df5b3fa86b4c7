"""The sleep family in the OpenAPI document: vLLM's /sleep, /wake_up and /is_sleeping."""

from __future__ import annotations

from app.api.http.openapi import json_doc, operation

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


COMPONENTS = {"SleepDone": _DONE, "IsSleeping": _SLEEPING}


# Operators' routes over every start-up worker (requests wake a sleeping model by themselves).
SLEEP = operation(
    "Free every start-up model's weights and KV cache until a request or /wake_up",
    json_doc("Every start-up worker's model sleeps.", "SleepDone"),
    (400, 401, 409, 503),
    parameters=[_LEVEL],
)
WAKE_UP = operation(
    "Load every sleeping start-up model again; answers once each is ready",
    json_doc("Every start-up worker's model is loaded.", "SleepDone"),
    (401, 503),
)
IS_SLEEPING = operation(
    "Whether the start-up models sleep (vLLM's)", json_doc("The state.", "IsSleeping"), (401, 503)
)
