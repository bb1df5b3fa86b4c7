"""llama-server's own `/completion` (and `/completions`) in the OpenAPI document: request, answer, stream."""

from __future__ import annotations

from typing import Any

from app.api.http.openapi import POST_ERRORS, Component, json_of, operation
from app.api.llama.schemas import InfillSchema, LlamaCompletionSchema

_NUMBER = {"type": "number"}
_PIECE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "token", "bytes", "logprob"],
    "properties": {
        "id": {"type": "integer"},
        "token": {"type": "string"},
        "bytes": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}},
        "logprob": _NUMBER,
    },
}
_PROBABILITIES = {
    "type": "array",
    "items": {
        **_PIECE,
        "properties": {**_PIECE["properties"], "top_logprobs": {"type": "array", "items": _PIECE}},
    },
}
_COMMON = {
    "index": {"type": "integer"},
    "content": {"type": "string"},
    "tokens": {"type": "array", "items": {"type": "integer"}, "description": "With return_tokens"},
    "id_slot": {"type": "integer"},
    "tokens_predicted": {"type": "integer"},
    "tokens_evaluated": {"type": "integer"},
    "completion_probabilities": _PROBABILITIES,
}
LLAMA_COMPLETION: dict[str, Any] = {
    "type": "object",
    "required": ["content", "stop", "stop_type", "tokens_predicted", "tokens_evaluated", "timings"],
    "properties": {
        **_COMMON,
        "stop": {"const": True},
        "model": {"type": "string"},
        "generation_settings": {"type": "object"},
        "prompt": {"type": "string"},
        "has_new_line": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "stop_type": {"enum": ["eos", "limit", "word", "none"]},
        "stopping_word": {"type": "string"},
        "tokens_cached": {"type": "integer"},
        "timings": {"type": "object", "additionalProperties": _NUMBER},
    },
}
LLAMA_PARTIAL: dict[str, Any] = {
    "type": "object",
    "required": ["content", "stop"],
    "properties": {**_COMMON, "stop": {"const": False}},
}
STREAM = (
    "With `stream: false` (the default), one JSON object. With `stream: true`, Server-Sent Events, "
    "as llama-server sends them: `data: <partial>` with the text of each chunk (`stop: false`, and "
    "its tokens' probabilities when `n_probs` asks), then `data: <the whole answer>` with `stop: "
    "true`; no `[DONE]`. Lines starting with `:` are keep-alive comments; an error after the 200 is "
    'one `data: {"error": {...}}` event.'
)


# Several completions of the prompt (n_cmpl) are a list of them, each with its index.
_ONE = {"$ref": "#/components/schemas/LlamaCompletion"}
_EVENT_DATA = [json_of(name) for name in ("LlamaCompletionPartial", "LlamaCompletion", "StreamError")]
COMPONENTS: dict[str, Component] = {
    "LlamaCompletionRequest": LlamaCompletionSchema,
    "LlamaCompletion": LLAMA_COMPLETION,
    "LlamaCompletionPartial": LLAMA_PARTIAL,
    "LlamaCompletionEvent": {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"anyOf": _EVENT_DATA}},
    },
    "LlamaCompletions": {"anyOf": [_ONE, {"type": "array", "items": _ONE}]},
    "InfillRequest": InfillSchema,
}


_ANSWER = {
    "description": STREAM,
    "content": {
        "application/json": {"schema": "LlamaCompletions"},
        "text/event-stream": {"schema": "LlamaCompletionEvent"},
    },
}
INFILL = operation(
    "Fill in the middle for editors, llama-server's way (input_prefix/suffix/extra, n_indent)",
    _ANSWER,
    (*POST_ERRORS, 501),
    body="InfillRequest",
)
COMPLETION = operation(
    "Continue one prompt, llama-server's own way (n_predict, n_probs, timings)",
    _ANSWER,
    POST_ERRORS,
    body="LlamaCompletionRequest",
)
