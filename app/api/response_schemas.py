"""Schemas of what the server answers, for the OpenAPI document (completion_objects.py builds them)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

FINISH_REASONS = ("stop", "length", "tool_calls")


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


class PromptTokensDetailsSchema(Schema):
    cached_tokens = fields.Integer(
        required=True, metadata={"description": "Prompt tokens served from the KV cache, not evaluated"}
    )


class UsageSchema(Schema):
    prompt_tokens = fields.Integer(required=True)
    completion_tokens = fields.Integer(required=True)
    total_tokens = fields.Integer(required=True)
    prompt_tokens_details = fields.Nested(PromptTokensDetailsSchema, required=True)


class _EnvelopeSchema(Schema):
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


class ModelSchema(Schema):
    id = fields.String(required=True)
    object = fields.String(required=True, validate=validate.Equal("model"))
    created = fields.Integer(required=True)
    owned_by = fields.String(required=True)
    ready = fields.Boolean(required=True, metadata={"description": "A worker holding it has loaded it"})
    kind = fields.String(required=True, validate=validate.OneOf(["generation", "embedding"]))


class ModelListSchema(Schema):
    object = fields.String(required=True, validate=validate.Equal("list"))
    data = fields.List(fields.Nested(ModelSchema), required=True)


class HealthSchema(Schema):
    status = fields.String(required=True, validate=validate.Equal("ok"))
    model = fields.String()


def event_schema(chunk: str) -> dict[str, object]:
    """One Server-Sent Event of a completion stream: its `data` is a chunk, an error, or `[DONE]`.

    The shape OpenAPI 3.2 gives `itemSchema`, in JSON Schema 2020-12 terms, so that tools
    (schemathesis among them) validate each event's JSON against the chunk schema.
    """

    def json_of(name: str) -> dict[str, object]:
        return {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": f"#/components/schemas/{name}"},
        }

    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"const": "message", "description": "Never sent: every event is unnamed."},
            "data": {"anyOf": [json_of(chunk), json_of("StreamError"), {"const": "[DONE]"}]},
        },
    }


COMPONENTS: dict[str, type[Schema]] = {
    "Error": ErrorSchema,
    "StreamError": StreamErrorSchema,
    "Usage": UsageSchema,
    "ChatCompletion": ChatCompletionSchema,
    "ChatCompletionChunk": ChatCompletionChunkSchema,
    "TextCompletion": TextCompletionSchema,
    "TextCompletionChunk": TextCompletionChunkSchema,
    "Model": ModelSchema,
    "ModelList": ModelListSchema,
    "Health": HealthSchema,
}
