"""The Responses family in the OpenAPI document: its routes, the Response object and each typed event."""

from __future__ import annotations

from typing import Any

from app.api.http.openapi import (
    POST_ERRORS,
    Component,
    event_stream,
    json_doc,
    list_schema,
    operation,
    page_params,
    query_param,
)
from app.api.responses.schemas import CompactRequestSchema, InputTokensRequestSchema, ResponseRequestSchema

_INT, _STR, _NUM, _BOOL = {"type": "integer"}, {"type": "string"}, {"type": "number"}, {"type": "boolean"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": {**required, **optional}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


OUTPUT_TEXT = _object(
    {
        "type": {"const": "output_text"},
        "text": _STR,
        "annotations": {"type": "array"},
        "logprobs": {"type": "array"},
    }
)
STATUS = {"enum": ["in_progress", "completed", "incomplete"]}
MESSAGE_ITEM = _object(
    {"type": {"const": "message"}, "id": _STR, "status": STATUS, "role": {"const": "assistant"},
     "content": {"type": "array", "items": _ref("ResponseOutputText")}}
)  # fmt: skip
FUNCTION_CALL_ITEM = _object(
    {"type": {"const": "function_call"}, "id": _STR, "call_id": _STR, "name": _STR, "arguments": _STR,
     "status": STATUS},
    namespace=_STR,  # a namespace tool's function
)  # fmt: skip
CUSTOM_CALL_ITEM = _object(
    {"type": {"const": "custom_tool_call"}, "id": _STR, "call_id": _STR, "name": _STR, "input": _STR,
     "status": STATUS},
    namespace=_STR,
)  # fmt: skip
REASONING_ITEM = _object(
    {"type": {"const": "reasoning"}, "id": _STR, "status": STATUS, "summary": {"type": "array"},
     "content": {"type": "array", "items": _object({"type": {"const": "reasoning_text"}, "text": _STR})}},
    encrypted_content=_nullable(_STR),  # with include reasoning.encrypted_content: sealed by the server
)  # fmt: skip
_ITEMS = (
    "ResponseMessageItem",
    "ResponseFunctionCallItem",
    "ResponseCustomToolCallItem",
    "ResponseReasoningItem",
)
_ITEM = {"anyOf": [_ref(name) for name in _ITEMS]}
USAGE = _object(
    {
        "input_tokens": _INT,
        "input_tokens_details": _object({"cached_tokens": _INT, "cache_write_tokens": _INT}),
        "output_tokens": _INT,
        "output_tokens_details": _object({"reasoning_tokens": _INT}),
        "total_tokens": _INT,
    }
)
RESPONSE = _object(
    {
        "id": _STR,
        "object": {"const": "response"},
        "created_at": _INT,
        "status": {"enum": ["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]},
        "completed_at": _nullable(_INT),
        "error": _nullable(_object({"code": _STR, "message": _STR})),
        "incomplete_details": _nullable(_object({"reason": {"const": "max_output_tokens"}})),
        "model": _STR,
        "output": {
            "type": "array",
            "items": _ITEM,
        },
        "background": _BOOL,
        "instructions": _nullable(_STR),
        "max_output_tokens": _nullable(_INT),
        "metadata": {"type": "object", "additionalProperties": _STR},
        "parallel_tool_calls": _BOOL,
        "previous_response_id": _nullable(_STR),
        "prompt_cache_key": _nullable(_STR),
        "reasoning": {"type": "object"},
        "store": _BOOL,
        "temperature": _NUM,
        "text": {"type": "object"},
        "tool_choice": {"anyOf": [_STR, {"type": "object"}]},
        "tools": {"type": "array"},
        "top_p": _NUM,
        "truncation": _STR,
    },
    user=_STR,
    usage=_ref("ResponseUsage"),
    conversation=_object({"id": _STR}),
)
_SEQ = {"sequence_number": _INT}
_WHERE = {"item_id": _STR, "output_index": _INT}
_PART = {**_WHERE, "content_index": _INT}
EVENTS: dict[str, dict[str, Any]] = {
    **{
        name: _object({"type": {"const": name}, **_SEQ, "response": _ref("Response")})
        for name in (
            "response.created",
            "response.in_progress",
            "response.completed",
            "response.incomplete",
            "response.failed",
        )
    },  # fmt: skip
    **{
        name: _object(
            {
                "type": {"const": name},
                **_SEQ,
                "output_index": _INT,
                "item": _ITEM,
            }
        )
        for name in ("response.output_item.added", "response.output_item.done")
    },  # fmt: skip
    **{
        name: _object({"type": {"const": name}, **_SEQ, **_PART, "part": _ref("ResponseOutputText")})
        for name in ("response.content_part.added", "response.content_part.done")
    },
    "response.output_text.delta": _object(
        {
            "type": {"const": "response.output_text.delta"},
            **_SEQ,
            **_PART,
            "delta": _STR,
            "logprobs": {"type": "array"},
        }
    ),
    "response.output_text.done": _object(
        {
            "type": {"const": "response.output_text.done"},
            **_SEQ,
            **_PART,
            "text": _STR,
            "logprobs": {"type": "array"},
        }
    ),
    "response.reasoning_text.delta": _object(
        {"type": {"const": "response.reasoning_text.delta"}, **_SEQ, **_PART, "delta": _STR}
    ),
    "response.reasoning_text.done": _object(
        {"type": {"const": "response.reasoning_text.done"}, **_SEQ, **_PART, "text": _STR}
    ),
    "response.function_call_arguments.delta": _object(
        {"type": {"const": "response.function_call_arguments.delta"}, **_SEQ, **_WHERE, "delta": _STR}
    ),
    "response.function_call_arguments.done": _object(
        {
            "type": {"const": "response.function_call_arguments.done"},
            **_SEQ,
            **_WHERE,
            "name": _STR,
            "arguments": _STR,
        }
    ),
    "response.custom_tool_call_input.delta": _object(
        {"type": {"const": "response.custom_tool_call_input.delta"}, **_SEQ, **_WHERE, "delta": _STR}
    ),
    "response.custom_tool_call_input.done": _object(
        {"type": {"const": "response.custom_tool_call_input.done"}, **_SEQ, **_WHERE, "input": _STR}
    ),
}
COMPACTED = _object(
    {"id": _STR, "object": {"const": "response.compaction"}, "created_at": _INT,
     "output": {"type": "array", "items": {"anyOf": [
         {"type": "object", "required": ["type", "id", "role", "content"]},
         _object({"type": {"const": "compaction"}, "id": _STR, "encrypted_content": _STR})]}},
     "usage": _ref("ResponseUsage")}
)  # fmt: skip
OBJECTS = {
    "Response": RESPONSE,
    "ResponseCompacted": COMPACTED,
    "ResponseCustomToolCallItem": CUSTOM_CALL_ITEM,
    "ResponseUsage": USAGE,
    "ResponseOutputText": OUTPUT_TEXT,
    "ResponseMessageItem": MESSAGE_ITEM,
    "ResponseFunctionCallItem": FUNCTION_CALL_ITEM,
    "ResponseReasoningItem": REASONING_ITEM,
    "ResponseInputTokens": _object({"object": {"const": "response.input_tokens"}, "input_tokens": _INT}),
    "ResponseDeleted": _object({"id": _STR, "object": {"const": "response"}, "deleted": {"const": True}}),
    "ResponseItem": {"type": "object", "required": ["type", "id"], "properties": {"id": _STR}},
    "ResponseItemList": list_schema("ResponseItem"),
}

STREAM_DESCRIPTION = (
    "With `stream: false` (the default), one JSON object. With `stream: true`, a Server-Sent-Event "
    "stream of typed events: each is `event: <type>` then `data: <JSON>` whose `type` equals the "
    "event's name and whose `sequence_number` counts from 0: `response.created`, "
    "`response.in_progress`, then per output item `response.output_item.added`, content or "
    "arguments events, `response.output_item.done`, and last `response.completed` (or "
    "`response.incomplete`, or `response.failed` for an error after the 200). No `[DONE]`. Lines "
    "starting with `:` are keep-alive comments."
)


COMPONENTS: dict[str, Component] = {
    **OBJECTS,
    "ResponseRequest": ResponseRequestSchema,
    "ResponseInputTokensRequest": InputTokensRequestSchema,
    "ResponseCompactRequest": CompactRequestSchema,
    **event_stream("ResponseEvent", EVENTS),
}


_ANSWERS = {
    "application/json": {"schema": "Response"},
    "text/event-stream": {"schema": "ResponseEventStream"},
}
CREATE = operation(
    "Answer input items with a Response (kept unless store is false or LLM_STORE=off)",
    {"description": STREAM_DESCRIPTION, "content": _ANSWERS},
    POST_ERRORS,
    body="ResponseRequest",
)
INPUT_TOKENS = operation(
    "Count the input's tokens after the chat template",
    json_doc("The count.", "ResponseInputTokens"),
    POST_ERRORS,  # no queue here, but the key's limits count this request too
    body="ResponseInputTokensRequest",
)
COMPACT = operation(
    "Shorten a conversation: its user messages, then a compaction item sealing a summary the "
    "served model writes of it (a later request's input takes the item in the turns' place)",
    json_doc("The compacted conversation.", "ResponseCompacted"),
    POST_ERRORS,
    body="ResponseCompactRequest",
)

# The stored responses' routes: each a 404 for an id its key did not store (or with LLM_STORE=off).
_INCLUDE = query_param("include", {"type": "array", "items": _STR}, "Accepted; nothing more is included.")
RETRIEVE = operation(
    "A stored response, as its client last saw it",
    {"description": "The Response, or with stream a background one's events.", "content": _ANSWERS},
    (400, 401, 404, 503),
    parameters=[
        query_param("stream", _BOOL, "A background response's events, replayed then followed live."),
        query_param(
            "starting_after", {"type": "integer", "minimum": 0}, "With stream: events after this one."
        ),
        _INCLUDE,
    ],
)
DELETE = operation(
    "Forget a stored response and its input items", json_doc("Deleted.", "ResponseDeleted"), (401, 404, 503)
)
INPUT_ITEMS = operation(
    "The input items a stored response answered, a page at a time",
    json_doc("A page.", "ResponseItemList"),
    (400, 401, 404, 503),
    parameters=[*page_params("An item", 100, 20), _INCLUDE],
)
CANCEL = operation(
    "Cancel a background response (a foreground one is a 400)",
    json_doc("The Response.", "Response"),
    (400, 401, 404, 503),
)
