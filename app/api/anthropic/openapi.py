"""The Messages family in the OpenAPI document: its routes, the Message, each event, Anthropic's errors."""

from __future__ import annotations

from typing import Any

from app.api.anthropic.schemas import CountTokensRequestSchema, MessagesRequestSchema
from app.api.http.openapi import Component, event_stream, json_doc, operation

_INT, _STR = {"type": "integer"}, {"type": "string"}
_STOP = {"anyOf": [{"enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use"]}, {"type": "null"}]}


def _object(required: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": required}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_BLOCK = {
    "anyOf": [_ref("AnthropicTextBlock"), _ref("AnthropicToolUseBlock"), _ref("AnthropicThinkingBlock")]
}
USAGE = _object(
    {
        "input_tokens": _INT,
        "output_tokens": _INT,
        "cache_creation_input_tokens": _INT,
        "cache_read_input_tokens": _INT,
    }
)
MESSAGE = _object(
    {
        "id": _STR,
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "content": {"type": "array", "items": _BLOCK},
        "model": _STR,
        "stop_reason": _STOP,
        "stop_sequence": {"anyOf": [_STR, {"type": "null"}]},
        "usage": _ref("AnthropicUsage"),
    }
)
ERROR = _object({"type": {"const": "error"}, "error": _object({"type": _STR, "message": _STR})})
EVENTS: dict[str, dict[str, Any]] = {
    "message_start": _object({"type": {"const": "message_start"}, "message": _ref("AnthropicMessage")}),
    "content_block_start": _object(
        {"type": {"const": "content_block_start"}, "index": _INT, "content_block": _BLOCK}
    ),
    "content_block_delta": _object(
        {
            "type": {"const": "content_block_delta"},
            "index": _INT,
            "delta": {
                "anyOf": [
                    _object({"type": {"const": "text_delta"}, "text": _STR}),
                    _object({"type": {"const": "input_json_delta"}, "partial_json": _STR}),
                    _object({"type": {"const": "thinking_delta"}, "thinking": _STR}),
                    _object({"type": {"const": "signature_delta"}, "signature": _STR}),
                ]
            },
        }
    ),
    "content_block_stop": _object({"type": {"const": "content_block_stop"}, "index": _INT}),
    "message_delta": _object(
        {
            "type": {"const": "message_delta"},
            "delta": _object({"stop_reason": _STOP, "stop_sequence": {"anyOf": [_STR, {"type": "null"}]}}),
            "usage": _ref("AnthropicUsage"),
        }
    ),
    "message_stop": _object({"type": {"const": "message_stop"}}),
    "ping": _object({"type": {"const": "ping"}}),
    "error": _ref("AnthropicError"),
}
OBJECTS = {
    "AnthropicMessage": MESSAGE,
    "AnthropicUsage": USAGE,
    "AnthropicTextBlock": _object({"type": {"const": "text"}, "text": _STR}),
    "AnthropicToolUseBlock": _object(
        {"type": {"const": "tool_use"}, "id": _STR, "name": _STR, "input": {"type": "object"}}
    ),
    "AnthropicThinkingBlock": _object({"type": {"const": "thinking"}, "thinking": _STR, "signature": _STR}),
    "AnthropicError": ERROR,
    "AnthropicTokenCount": _object({"input_tokens": _INT}),
}

STREAM_DESCRIPTION = (
    "With `stream: false` (the default), one JSON object. With `stream: true`, Anthropic's event "
    "stream: `message_start`, per content block `content_block_start`, `content_block_delta` "
    "(`thinking_delta` then `signature_delta`, `text_delta` or `input_json_delta`), "
    "`content_block_stop`, then `message_delta` (stop reason, usage) and `message_stop`. "
    "`message_start` waits for the prompt's evaluation to start (its usage says what the cache "
    "held); keep-alives are SSE comments before it and `ping` events after; an error after the 200 "
    "is an `error` event."
)


# A request must name a served generating model: only those are answered.
MODEL_NAMES = {"MessagesRequest": "generate", "MessagesCountTokensRequest": "generate"}


# Anthropic's statuses: overload is 529, not 503, and every error body has Anthropic's shape.
_ERRORS = (400, 401, 404, 406, 413, 429, 500, 529)
MESSAGES = operation(
    "Answer a conversation with a Message (Anthropic's Messages API)",
    {
        "description": STREAM_DESCRIPTION,
        "content": {
            "application/json": {"schema": "AnthropicMessage"},
            "text/event-stream": {"schema": "AnthropicEventStream"},
        },
    },
    _ERRORS,
    body="MessagesRequest",
    error_schema="AnthropicError",
)
COUNT_TOKENS = operation(
    "Count the conversation's tokens after the chat template",
    json_doc("The count.", "AnthropicTokenCount"),
    _ERRORS,
    body="MessagesCountTokensRequest",
    error_schema="AnthropicError",
)
COMPONENTS: dict[str, Component] = {
    **OBJECTS,
    "MessagesRequest": MessagesRequestSchema,
    "MessagesCountTokensRequest": CountTokensRequestSchema,
    **event_stream("AnthropicEvent", EVENTS),
}
