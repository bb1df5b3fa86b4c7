"""The chat family in the OpenAPI document: its routes, and the objects objects.py builds, as schemas."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate

from app.api.chat import template_openapi
from app.api.chat.schemas import ChatCompletionRequestSchema, CompletionRequestSchema
from app.api.http.openapi import POST_ERRORS, Component, event_schema, json_doc, operation

FINISH_REASONS = ("stop", "length", "tool_calls")


class PromptTokensDetailsSchema(Schema):
    cached_tokens = fields.Integer(
        required=True, metadata={"description": "Prompt tokens served from the KV cache, not evaluated"}
    )


class UsageSchema(Schema):
    prompt_tokens = fields.Integer(required=True)
    completion_tokens = fields.Integer(required=True)
    total_tokens = fields.Integer(required=True)
    prompt_tokens_details = fields.Nested(PromptTokensDetailsSchema, required=True)


class TimingsSchema(Schema):
    """llama-server's `timings`: the prompt's and the answer's tokens, milliseconds and rates."""

    cache_n = fields.Integer(required=True, metadata={"description": "Prompt tokens served from the cache"})
    prompt_n = fields.Integer(required=True, metadata={"description": "Prompt tokens evaluated"})
    prompt_ms = fields.Float(required=True)
    prompt_per_token_ms = fields.Float(required=True)
    prompt_per_second = fields.Float(required=True)
    predicted_n = fields.Integer(required=True)
    predicted_ms = fields.Float(required=True)
    predicted_per_token_ms = fields.Float(required=True)
    predicted_per_second = fields.Float(required=True)


class _EnvelopeSchema(Schema):
    # llama-server's, on the whole answer and on a stream's last chunk (each chunk: timings_per_token).
    timings = fields.Nested(TimingsSchema)
    id = fields.String(required=True)
    created = fields.Integer(required=True)
    model = fields.String(required=True)
    system_fingerprint = fields.String(
        required=True,
        metadata={"description": "The llama.cpp build, model file and settings that decide the output"},
    )


class TopLogprobSchema(Schema):
    token = fields.String(required=True)
    logprob = fields.Float(required=True)
    bytes = fields.List(fields.Integer(), required=True)


class TokenLogprobSchema(TopLogprobSchema):
    top_logprobs = fields.List(fields.Nested(TopLogprobSchema), required=True)


class ChatLogprobsSchema(Schema):
    content = fields.List(fields.Nested(TokenLogprobSchema), required=True)
    refusal = fields.String(required=True, allow_none=True)


class TextLogprobsSchema(Schema):
    tokens = fields.List(fields.String(), required=True)
    token_logprobs = fields.List(fields.Float(), required=True)
    top_logprobs = fields.List(fields.Dict(keys=fields.String(), values=fields.Float()), required=True)
    text_offset = fields.List(fields.Integer(), required=True)


class FunctionCallSchema(Schema):
    name = fields.String(required=True)
    arguments = fields.String(
        required=True, metadata={"description": "The arguments, as a JSON object's text"}
    )


class ToolCallSchema(Schema):
    id = fields.String(required=True)
    type = fields.String(required=True, validate=validate.Equal("function"))
    function = fields.Nested(FunctionCallSchema, required=True)


class FunctionCallDeltaSchema(Schema):
    name = fields.String()
    arguments = fields.String()


class ToolCallDeltaSchema(Schema):
    """A piece of a streamed tool call: id, type and name first, then arguments in pieces."""

    index = fields.Integer(required=True)
    id = fields.String()
    type = fields.String(validate=validate.Equal("function"))
    function = fields.Nested(FunctionCallDeltaSchema)


class AssistantMessageSchema(Schema):
    role = fields.String(required=True, validate=validate.Equal("assistant"))
    content = fields.String(required=True, allow_none=True)
    refusal = fields.String(required=True, allow_none=True)
    tool_calls = fields.List(fields.Nested(ToolCallSchema))
    reasoning_content = fields.String(metadata={"description": "A thinking model's reasoning, split off"})


class ChatChoiceSchema(Schema):
    index = fields.Integer(required=True)
    message = fields.Nested(AssistantMessageSchema, required=True)
    logprobs = fields.Nested(ChatLogprobsSchema, required=True, allow_none=True)
    finish_reason = fields.String(required=True, validate=validate.OneOf(FINISH_REASONS))


class ChatCompletionSchema(_EnvelopeSchema):
    """A whole chat completion (`stream: false`)."""

    object = fields.String(required=True, validate=validate.Equal("chat.completion"))
    choices = fields.List(fields.Nested(ChatChoiceSchema), required=True)
    usage = fields.Nested(UsageSchema, required=True)


class DeltaSchema(Schema):
    role = fields.String(validate=validate.Equal("assistant"))
    content = fields.String()
    tool_calls = fields.List(fields.Nested(ToolCallDeltaSchema))
    reasoning_content = fields.String()


class ChatChunkChoiceSchema(Schema):
    index = fields.Integer(required=True)
    delta = fields.Nested(DeltaSchema, required=True)
    logprobs = fields.Nested(ChatLogprobsSchema, required=True, allow_none=True)
    finish_reason = fields.String(required=True, allow_none=True, validate=validate.OneOf(FINISH_REASONS))


class ChatCompletionChunkSchema(_EnvelopeSchema):
    """One event of a chat stream."""

    object = fields.String(required=True, validate=validate.Equal("chat.completion.chunk"))
    choices = fields.List(fields.Nested(ChatChunkChoiceSchema), required=True)
    usage = fields.Nested(UsageSchema, allow_none=True)


class TextChoiceSchema(Schema):
    index = fields.Integer(required=True)
    text = fields.String(required=True)
    logprobs = fields.Nested(TextLogprobsSchema, required=True, allow_none=True)
    finish_reason = fields.String(required=True, allow_none=True, validate=validate.OneOf(FINISH_REASONS))


class TextCompletionSchema(_EnvelopeSchema):
    """A whole text completion (`stream: false`); `finish_reason` is never null here."""

    object = fields.String(required=True, validate=validate.Equal("text_completion"))
    choices = fields.List(fields.Nested(TextChoiceSchema), required=True)
    usage = fields.Nested(UsageSchema, required=True)


class TextCompletionChunkSchema(TextCompletionSchema):
    """One event of a text-completion stream: the whole object's shape, usage only in the last."""

    usage = fields.Nested(UsageSchema, allow_none=True)


STREAM_DESCRIPTION = (
    "With `stream: false` (the default), one JSON object. With `stream: true`, a Server-Sent-Event "
    "stream (`text/event-stream`): each event is one line `data: <chunk JSON>` followed by a blank "
    "line; chunks follow the chunk schema; with `stream_options.include_usage` the last chunk has "
    "`choices: []` and the `usage`; the stream ends with `data: [DONE]`. Lines starting with `:` "
    'are keep-alive comments. An error after the 200 is one `data: {"error": {...}}` event, '
    "and then the stream ends."
)

OBJECTS: dict[str, type[Schema]] = {
    "Usage": UsageSchema,
    "ChatCompletion": ChatCompletionSchema,
    "ChatCompletionChunk": ChatCompletionChunkSchema,
    "TextCompletion": TextCompletionSchema,
    "TextCompletionChunk": TextCompletionChunkSchema,
}
INPUT_TOKENS = {
    "type": "object",
    "required": ["object", "input_tokens"],
    "properties": {
        "object": {"const": "chat.completion.input_tokens"},
        "input_tokens": {"type": "integer", "minimum": 0},
    },
}


def _generation(summary: str, request: str, whole: str, chunk: str) -> dict[str, Any]:
    answer = {
        "description": STREAM_DESCRIPTION,
        "content": {
            "application/json": {"schema": whole},
            "text/event-stream": {"schema": chunk + "Event"},
        },
    }
    return operation(summary, answer, POST_ERRORS, body=request)


COMPONENTS: dict[str, Component] = {
    **OBJECTS,
    **{chunk + "Event": event_schema(chunk) for chunk in ("ChatCompletionChunk", "TextCompletionChunk")},
    "ChatCompletionRequest": ChatCompletionRequestSchema,
    "CompletionRequest": CompletionRequestSchema,
    "ChatInputTokens": INPUT_TOKENS,
    **template_openapi.COMPONENTS,
}


CHAT_COMPLETION = _generation(
    "Answer a conversation", "ChatCompletionRequest", "ChatCompletion", "ChatCompletionChunk"
)
COMPLETION = _generation(
    "Continue a text prompt", "CompletionRequest", "TextCompletion", "TextCompletionChunk"
)
INPUT_TOKEN_COUNT = operation(
    "Count a chat request's prompt tokens after the chat template (tools included)",
    json_doc("The count.", "ChatInputTokens"),
    POST_ERRORS,
    body="ChatCompletionRequest",
)
APPLY_TEMPLATE, PROPS = template_openapi.APPLY_TEMPLATE, template_openapi.PROPS
