"""Marshmallow schemas for the request bodies, with OpenAI's types and bounds."""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate, validates_schema

ROLES = ("system", "developer", "user", "assistant", "tool")

# Fields of the OpenAI surface this server does not implement yet: a client that sets
# one to anything but its neutral value gets a 400 naming it instead of silently wrong output.
_NEUTRAL = (None, False, 0, "", [], {}, "none", "auto", {"type": "text"})


class BaseSchema(Schema):
    """Ignore unknown fields: OpenAI clients send many a server may not know."""

    class Meta:
        unknown = EXCLUDE


class StrictFloat(fields.Float):
    """A JSON number, as OpenAI takes it: no numeric strings, no booleans."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError("must be a number")
        return super()._deserialize(value, attr, data, **kwargs)


class StrictInteger(fields.Integer):
    """A JSON integer: no numeric strings, no booleans, no 1.5."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise ValidationError("must be an integer")
        return super()._deserialize(value, attr, data, **kwargs)


class StrictBoolean(fields.Boolean):
    """A JSON true or false, nothing merely truthy."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("must be true or false")
        return value


class StopField(fields.Field):
    """`stop`: a string or a list of up to four strings, loaded as a list."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            {"type": "null"},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str]:
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValidationError("must be a string or a list of strings")
        if len(values) > 4:
            raise ValidationError("must hold at most 4 strings")
        return [v for v in values if v]


class ContentField(fields.Field):
    """Message `content`: a string or a list of text parts, loaded as one string."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
                    "required": ["type", "text"],
                },
            },
            {"type": "null"},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise ValidationError("must be a string or a list of content parts")
        texts = []
        for index, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else None
                raise ValidationError(
                    {index: {"type": [f"content part type {kind!r} is not supported; use 'text'"]}}
                )
            if not isinstance(part.get("text"), str):
                raise ValidationError({index: {"text": ["must be a string"]}})
            texts.append(part["text"])
        return "".join(texts)


class PromptField(fields.Field):
    """Completions `prompt`: a string, or a list holding exactly one string."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str):
            raise ValidationError("must be a string (a list of prompts is not supported yet)")
        return value


class MessageSchema(BaseSchema):
    """One chat message."""

    role = fields.String(required=True, validate=validate.OneOf(ROLES))
    content = ContentField(load_default=None, allow_none=True)
    name = fields.String(allow_none=True)
    tool_calls = fields.List(fields.Dict(), allow_none=True)
    tool_call_id = fields.String(allow_none=True)

    @validates_schema
    def require_content(self, data: dict[str, Any], **kwargs: Any) -> None:
        """Only an assistant message that calls tools may leave out its content."""
        if data.get("content") is None and not (data["role"] == "assistant" and data.get("tool_calls")):
            raise ValidationError("is required for this role", "content")


class StreamOptionsSchema(BaseSchema):
    """`stream_options`."""

    include_usage = StrictBoolean(load_default=False, allow_none=True)


def _number(low: float, high: float | None = None, *, low_inclusive: bool = True) -> fields.Float:
    return StrictFloat(
        allow_none=True,
        validate=validate.Range(min=low, max=high, min_inclusive=low_inclusive),
    )


def _count(low: int = 0, high: int | None = None) -> fields.Integer:
    return StrictInteger(allow_none=True, validate=validate.Range(min=low, max=high))


def _neutral_only(openapi: dict[str, Any]) -> fields.Raw:
    return fields.Raw(allow_none=True, metadata={"openapi": openapi})


class GenerationSchema(BaseSchema):
    """Fields shared by chat and text completions."""

    model = fields.String(allow_none=True)
    max_tokens = _count(1)
    temperature = _number(0, 2)
    top_p = _number(0, 1, low_inclusive=False)
    top_k = _count(0)
    min_p = _number(0, 1)
    repeat_penalty = _number(0)
    presence_penalty = _number(-2, 2)
    frequency_penalty = _number(-2, 2)
    stop = StopField(allow_none=True)
    seed = StrictInteger(allow_none=True)
    stream = StrictBoolean(allow_none=True)
    stream_options = fields.Nested(StreamOptionsSchema, allow_none=True)
    user = fields.String(allow_none=True)
    n = StrictInteger(allow_none=True, validate=validate.Equal(1, error="only n=1 is supported"))
    # Not implemented yet: accepted only with their neutral value (the document says so).
    logprobs = _neutral_only({"enum": [None, False]})
    top_logprobs = _neutral_only({"enum": [None, 0]})
    logit_bias = _neutral_only({"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]})
    response_format = _neutral_only(
        {
            "anyOf": [
                {"type": "null"},
                {"type": "object", "properties": {"type": {"const": "text"}}, "required": ["type"]},
            ]
        }
    )
    tools = _neutral_only({"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]})
    tool_choice = _neutral_only({"enum": [None, "none", "auto"]})
    best_of = _neutral_only({"enum": [None, 1]})

    @validates_schema
    def reject_unsupported(self, data: dict[str, Any], **kwargs: Any) -> None:
        """Refuse, by name, the OpenAI options this server does not implement yet."""
        logprobs = data.get("logprobs")
        if logprobs is not None and logprobs is not False:
            # Identity, not equality: `logprobs: 0` (== False) asks completions for logprobs.
            raise ValidationError("is not supported by this server yet", "logprobs")
        for name in ("top_logprobs", "logit_bias", "response_format", "tools", "tool_choice"):
            if data.get(name) not in _NEUTRAL:
                raise ValidationError("is not supported by this server yet", name)
        if data.get("best_of") not in (None, 1):
            raise ValidationError("only best_of=1 is supported", "best_of")


class ChatCompletionSchema(GenerationSchema):
    """`POST /v1/chat/completions`."""

    messages = fields.List(fields.Nested(MessageSchema), required=True, validate=validate.Length(min=1))
    max_completion_tokens = _count(1)


class CompletionSchema(GenerationSchema):
    """`POST /v1/completions`."""

    prompt = PromptField(required=True)
    echo = StrictBoolean(allow_none=True)
    suffix = fields.String(allow_none=True)


chat_completion_schema = ChatCompletionSchema()
completion_schema = CompletionSchema()
