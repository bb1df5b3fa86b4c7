"""The pieces of the OpenAPI document every family uses: error answers (described once), bodies, streams."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from apispec import APISpec
from marshmallow import Schema, fields

# What each error status means, on any route that can answer it. Anthropic's routes say
# 529 where the others say 503 (app/api/anthropic/errors.py), with the same meaning.
ERRORS = {
    400: "Invalid request: a field is missing, of the wrong type or out of bounds (`param` names it), "
    "the body is not a JSON object, the input and `max_tokens` do not fit the context "
    "(`code: context_length_exceeded`), or the model is not of the kind the route needs.",
    401: "Missing or wrong API key.",
    403: "The operator has not allowed it: e.g. a LoRA adapter file outside LLM_LORA_DIRS.",
    404: "No such model (`code: model_not_found`).",
    405: "Method not allowed.",
    409: "The on-demand model serves requests: it cannot be unloaded now (`code: model_busy`).",
    406: "The Accept header admits none of the media types the route answers with.",
    413: "The request body is larger than LLM_MAX_BODY_BYTES.",
    429: "This worker's queue is full (`code: queue_full`), or the API key is over one of its limits "
    "(`code: rate_limit_exceeded`); retry after `Retry-After` seconds.",
    500: "An unexpected server error (details are in the server log).",
    501: "Not done here: Ollama's model management (this server's models come from LLM_MODELS).",
    503: "The model is not loaded yet, no worker holding it is ready, the request waited longer than "
    "LLM_QUEUE_TIMEOUT (`code: queue_timeout`), the KV cache is full (`code: kv_cache_full`), or the "
    "response store cannot be reached (`code: store_unavailable`); retry after `Retry-After` seconds.",
}
ERRORS[529] = ERRORS[503]
_RETRY = (429, 503, 529)

# The statuses of a POST route with a body: generating, counting or embedding.
POST_ERRORS = (400, 401, 404, 406, 413, 429, 500, 503)


class ErrorBodySchema(Schema):
    message = fields.String(required=True)
    type = fields.String(required=True)
    param = fields.String(required=True, allow_none=True)
    code = fields.String(required=True, allow_none=True)


class ErrorSchema(Schema):
    """OpenAI's error shape, for every error status."""

    error = fields.Nested(ErrorBodySchema, required=True)


class StreamErrorBodySchema(Schema):
    message = fields.String(required=True)
    type = fields.String(required=True)
    code = fields.String(required=True, allow_none=True)


class StreamErrorSchema(Schema):
    """An error after the 200: one `data:` event of this shape ends the stream."""

    error = fields.Nested(StreamErrorBodySchema, required=True)


# A component: a marshmallow schema (apispec converts it), or JSON Schema as it is.
Component = type[Schema] | dict[str, Any]
# The components every family refers to: OpenAI's error shapes.
SHARED: dict[str, Component] = {"Error": ErrorSchema, "StreamError": StreamErrorSchema}


def add_components(spec: APISpec, components: Mapping[str, Component]) -> None:
    """Register each component under its name."""
    for name, component in components.items():
        if isinstance(component, dict):
            spec.components.schema(name, component=component)
        else:
            spec.components.schema(name, schema=component)


def error_responses(*statuses: int, schema: str = "Error") -> dict[int, Any]:
    """The answers for `statuses`, each in the error shape `schema` (with Retry-After where it applies)."""
    return {
        status: {
            "description": ERRORS[status],
            "content": {"application/json": {"schema": schema}},
            **({"headers": {"Retry-After": {"schema": {"type": "integer"}}}} if status in _RETRY else {}),
        }
        for status in statuses
    }


def json_doc(description: str, schema: str | dict[str, Any]) -> dict[str, Any]:
    """A 200 answered with one JSON object."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def operation(
    summary: str,
    answer: dict[str, Any] | None,
    errors: Iterable[int] | dict[int, Any] = (),
    *,
    body: str | dict[str, Any] | None = None,
    parameters: Iterable[dict[str, Any]] = (),
    error_schema: str = "Error",
) -> dict[str, Any]:
    """One operation: `body` (a component's name, for a required JSON body, or the whole
    requestBody), answered with `answer` (the 200) or one of `errors` (statuses, in the shape
    `error_schema`). Its path, method and path parameters come from the route that declares it."""
    answers = errors if isinstance(errors, dict) else error_responses(*errors, schema=error_schema)
    described: dict[str, Any] = {
        "summary": summary,
        "responses": {**({200: answer} if answer else {}), **answers},
    }
    if isinstance(body, str):
        body = {"required": True, "content": {"application/json": {"schema": body}}}
    if body is not None:
        described["requestBody"] = body
    if parameters := list(parameters):
        described["parameters"] = parameters
    return described


# `?model=`: which model's worker answers a GET about one model (default: the first).
MODEL_QUERY = {"name": "model", "in": "query", "required": False, "schema": {"type": "string"}}

View = TypeVar("View", bound=Callable[..., Any])
_DECLARED = "openapi_operation"


def documented(described: dict[str, Any]) -> Callable[[View], View]:
    """Declare a view's operation (from `operation`): the document is built from the routes that
    declare one, and the app does not start with a family's route that declares none."""

    def declare(view: View) -> View:
        setattr(view, _DECLARED, described)
        return view

    return declare


def declared(view: Callable[..., Any]) -> dict[str, Any] | None:
    """The operation a view declared with `documented`, if any."""
    found: dict[str, Any] | None = getattr(view, _DECLARED, None)
    return found


def json_of(name: str) -> dict[str, Any]:
    """An SSE event's `data`: the text of a JSON value that follows component `name`.

    The shape OpenAPI 3.2 gives `itemSchema`, in JSON Schema 2020-12 terms, so that tools
    (schemathesis among them) validate each event's JSON against its schema.
    """
    return {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"$ref": f"#/components/schemas/{name}"},
    }


def event_schema(chunk: str) -> dict[str, Any]:
    """One Server-Sent Event of a completion stream: its `data` is a chunk, an error, or `[DONE]`."""
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"const": "message", "description": "Never sent: every event is unnamed."},
            "data": {"anyOf": [json_of(chunk), json_of("StreamError"), {"const": "[DONE]"}]},
        },
    }


def event_stream(prefix: str, events: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each named event's schema, and `<prefix>Stream`: an SSE event that is any of them."""
    stream = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"enum": list(events)},
            "data": {"anyOf": [json_of(f"{prefix}.{name}") for name in events]},
        },
    }
    return {**{f"{prefix}.{name}": schema for name, schema in events.items()}, f"{prefix}Stream": stream}


def query_param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """An optional query parameter."""
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def page_params(what: str, most: int, default: int) -> list[dict[str, Any]]:
    """`after`, `limit` and `order`: how every stored list is paged, as OpenAI pages its lists."""
    return [
        query_param("after", {"type": "string"}, f"{what} id: the page starts after it."),
        query_param(
            "limit", {"type": "integer", "minimum": 1, "maximum": most}, f"How many per page ({default})."
        ),
        query_param("order", {"enum": ["asc", "desc"]}, "desc (newest first, the default) or asc."),
    ]


def list_schema(item: str) -> dict[str, Any]:
    """A page of a stored list: OpenAI's list object over component `item`."""
    nullable_id = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    return {
        "type": "object",
        "required": ["object", "data", "first_id", "last_id", "has_more"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"$ref": f"#/components/schemas/{item}"}},
            "first_id": nullable_id,
            "last_id": nullable_id,
            "has_more": {"type": "boolean"},
        },
    }
