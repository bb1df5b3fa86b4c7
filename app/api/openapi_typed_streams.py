"""OpenAPI for the Responses and Messages routes, whose streams name every event (`event:` + `data:`)."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.anthropic import documents as anthropic
from app.api.anthropic.schemas import CountTokensRequestSchema, MessagesRequestSchema
from app.api.responses import documents as responses
from app.api.responses.schemas import InputTokensRequestSchema, ResponseRequestSchema

_RESPONSES_STREAM = (
    "With `stream: true`, a Server-Sent-Event stream of typed events: each is `event: <type>` then "
    "`data: <JSON>` whose `type` equals the event's name and whose `sequence_number` counts from 0: "
    "`response.created`, `response.in_progress`, then per output item `response.output_item.added`, "
    "content or arguments events, `response.output_item.done`, and last `response.completed` (or "
    "`response.incomplete`, or `response.failed` for an error after the 200). No `[DONE]`. Lines "
    "starting with `:` are keep-alive comments."
)
_MESSAGES_STREAM = (
    "With `stream: true`, Anthropic's event stream: `message_start`, per content block "
    "`content_block_start`, `content_block_delta` (`text_delta` or `input_json_delta`), "
    "`content_block_stop`, then `message_delta` (stop reason, usage) and `message_stop`. Keep-alives "
    "are `ping` events; an error after the 200 is an `error` event."
)
_OPENAI_ERRORS = {
    400: "Invalid request (`param` names the field), or the input does not fit the context.",
    401: "Missing or wrong API key.",
    404: "No such model (`code: model_not_found`).",
    406: "The Accept header admits neither application/json nor text/event-stream.",
    413: "The request body is larger than LLM_MAX_BODY_BYTES.",
    429: "This worker's queue is full, or the API key is over one of its limits; retry after `Retry-After`.",
    500: "An unexpected server error (details are in the server log).",
    503: "The model is not loaded yet, or the request waited longer than LLM_QUEUE_TIMEOUT.",
}
# Anthropic's statuses: overload is 529, and every error body has Anthropic's shape.
_ANTHROPIC_ERRORS = {529 if status == 503 else status: text for status, text in _OPENAI_ERRORS.items()}


def _json_of(name: str) -> dict[str, Any]:
    return {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"$ref": f"#/components/schemas/{name}"},
    }


def _named_events(spec: APISpec, prefix: str, events: dict[str, dict[str, Any]]) -> str:
    """Register each event's schema, and one schema of an SSE event that is any of them; its name."""
    for name, schema in events.items():
        spec.components.schema(f"{prefix}.{name}", component=schema)
    stream = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"enum": list(events)},
            "data": {"anyOf": [_json_of(f"{prefix}.{name}") for name in events]},
        },
    }
    spec.components.schema(f"{prefix}Stream", component=stream)
    return f"{prefix}Stream"


def _errors(statuses: dict[int, str], schema: str) -> dict[int, Any]:
    retry = {"headers": {"Retry-After": {"schema": {"type": "integer"}}}}
    return {
        status: {
            "description": text,
            "content": {"application/json": {"schema": schema}},
            **(retry if status in (429, 503, 529) else {}),
        }
        for status, text in statuses.items()
    }


def _post(
    summary: str, request: str, answers: dict[str, Any], description: str, errors: dict[int, Any]
) -> Any:
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
            "responses": {200: {"description": description, "content": answers}, **errors},
        }
    }


def add_paths(spec: APISpec) -> None:
    """The four routes, their request schemas, answers, event streams and errors."""
    for name, schema in {**responses.COMPONENTS, **anthropic.COMPONENTS}.items():
        spec.components.schema(name, component=schema)
    spec.components.schema("ResponseRequest", schema=ResponseRequestSchema)
    spec.components.schema("ResponseInputTokensRequest", schema=InputTokensRequestSchema)
    spec.components.schema("MessagesRequest", schema=MessagesRequestSchema)
    spec.components.schema("MessagesCountTokensRequest", schema=CountTokensRequestSchema)
    openai_errors = _errors(_OPENAI_ERRORS, "Error")
    anthropic_errors = _errors(_ANTHROPIC_ERRORS, "AnthropicError")
    responses_stream = _named_events(spec, "ResponseEvent", responses.EVENTS)
    messages_stream = _named_events(spec, "AnthropicEvent", anthropic.EVENTS)
    both = "With `stream: false` (the default), one JSON object. "
    spec.path(
        path="/v1/responses",
        operations=_post(
            "Answer input items with a Response (stateless)",
            "ResponseRequest",
            {"application/json": {"schema": "Response"}, "text/event-stream": {"schema": responses_stream}},
            both + _RESPONSES_STREAM,
            openai_errors,
        ),
    )
    spec.path(
        path="/v1/responses/input_tokens",
        operations=_post(
            "Count the input's tokens after the chat template",
            "ResponseInputTokensRequest",
            {"application/json": {"schema": "ResponseInputTokens"}},
            "The count.",
            openai_errors,  # no queue here, but the key's limits count this request too
        ),
    )
    spec.path(
        path="/v1/messages",
        operations=_post(
            "Answer a conversation with a Message (Anthropic's Messages API)",
            "MessagesRequest",
            {
                "application/json": {"schema": "AnthropicMessage"},
                "text/event-stream": {"schema": messages_stream},
            },
            both + _MESSAGES_STREAM,
            anthropic_errors,
        ),
    )
    spec.path(
        path="/v1/messages/count_tokens",
        operations=_post(
            "Count the conversation's tokens after the chat template",
            "MessagesCountTokensRequest",
            {"application/json": {"schema": "AnthropicTokenCount"}},
            "The count.",
            anthropic_errors,
        ),
    )
