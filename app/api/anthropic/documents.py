"""JSON Schemas of what /v1/messages answers, for the OpenAPI document: the Message, each event, errors."""

from __future__ import annotations

from typing import Any

_INT, _STR = {"type": "integer"}, {"type": "string"}
_STOP = {"anyOf": [{"enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use"]}, {"type": "null"}]}


def _object(required: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": required}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_BLOCK = {"anyOf": [_ref("AnthropicTextBlock"), _ref("AnthropicToolUseBlock")]}
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
COMPONENTS = {
    "AnthropicMessage": MESSAGE,
    "AnthropicUsage": USAGE,
    "AnthropicTextBlock": _object({"type": {"const": "text"}, "text": _STR}),
    "AnthropicToolUseBlock": _object(
        {"type": {"const": "tool_use"}, "id": _STR, "name": _STR, "input": {"type": "object"}}
    ),
    "AnthropicError": ERROR,
    "AnthropicTokenCount": _object({"input_tokens": _INT}),
}
