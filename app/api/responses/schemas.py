"""Marshmallow schemas of a Responses API request: input items, function tools, text format."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.api.common.fields import StrictBoolean, StrictInteger, count, number
from app.api.common.schemas import BaseSchema

_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")


def _text_of(content: Any, where: str) -> str:
    """A message's content, a string or a list of input_text/output_text parts, as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError(f"{where}: must be a string or a list of content parts")
    texts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS:
            raise ValidationError(
                f"{where}[{index}]: content part type {kind!r} is not supported; use input_text"
            )
        if not isinstance(part.get("text"), str):
            raise ValidationError(f"{where}[{index}].text: must be a string")
        texts.append(part["text"])
    return "".join(texts)


class InputField(fields.Field[list[dict[str, Any]]]):
    """`input`: a string, or a list of items (messages, function calls and their outputs), normalised."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "description": "A message, function_call or function_call_output item",
                },
            },
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return normalized_input(value)


def normalized_input(value: Any) -> list[dict[str, Any]]:
    """`input` (a string or OpenAI's items) as this server's items: text content, no ids."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise ValidationError("must be a string or a list of items")
    return [_normalized_item(item, f"[{i}]") for i, item in enumerate(value)]


def _normalized_item(item: Any, where: str) -> dict[str, Any]:
    """One item, checked; stored items (with ids, status, annotations) come back through here too."""
    if not isinstance(item, dict):
        raise ValidationError(f"{where}: must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        if item.get("role") not in _ROLES:
            raise ValidationError(f"{where}.role: must be one of {', '.join(_ROLES)}")
        return {
            "type": "message",
            "role": item["role"],
            "content": _text_of(item.get("content"), f"{where}.content"),
        }
    if kind == "function_call":
        for key in ("call_id", "name", "arguments"):
            if not isinstance(item.get(key), str):
                raise ValidationError(f"{where}.{key}: must be a string")
        return {k: item[k] for k in ("type", "call_id", "name", "arguments")}
    if kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise ValidationError(f"{where}.call_id: must be a string")
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output, f"{where}.output")
        return {"type": kind, "call_id": item["call_id"], "output": text}
    if kind == "reasoning":  # a stateless agent hands the model's reasoning back each turn
        parts = [
            part for key in ("content", "summary") if isinstance(item.get(key), list) for part in item[key]
        ]
        texts = [str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return {"type": kind, "text": "\n".join(texts)}
    raise ValidationError(f"{where}.type: item type {kind!r} is not supported by this server")


class FunctionToolSchema(BaseSchema):
    """A function tool, as the Responses API writes it (flat, not under `function`)."""

    type = fields.String(
        required=True, validate=validate.Equal("function", error="only function tools are supported")
    )
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    parameters = fields.Dict(allow_none=True)
    strict = StrictBoolean(allow_none=True)


class ToolChoiceField(fields.Field[str | dict[str, str]]):
    """`tool_choice`: none, auto, required, or {"type": "function", "name": ...}."""

    OPENAPI = {
        "anyOf": [
            {"enum": ["none", "auto", "required"]},
            {
                "type": "object",
                "properties": {"type": {"const": "function"}, "name": {"type": "string"}},
                "required": ["type", "name"],
            },
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | dict[str, str]:
        if value in ("none", "auto", "required"):
            return str(value)
        if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
            return {"name": value["name"]}
        raise ValidationError("must be 'none', 'auto', 'required' or {'type': 'function', 'name': ...}")


class TextFormatSchema(BaseSchema):
    """`text.format`: free text, any JSON object, or JSON following a schema."""

    type = fields.String(required=True, validate=validate.OneOf(["text", "json_object", "json_schema"]))
    name = fields.String(validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    schema = fields.Dict(allow_none=True)
    strict = StrictBoolean(allow_none=True)

    @validates_schema
    def schema_given(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data["type"] == "json_schema" and (not data.get("name") or data.get("schema") is None):
            raise ValidationError("json_schema needs a name and a schema", "schema")


class TextSchema(BaseSchema):
    format = fields.Nested(TextFormatSchema, allow_none=True)


class ResponseRequestSchema(BaseSchema):
    """`POST /v1/responses`."""

    model = fields.String(allow_none=True)
    input = InputField(required=True)
    instructions = fields.String(allow_none=True)
    max_output_tokens = count(1)
    temperature = number(0, 2)
    top_p = number(0, 1, low_inclusive=False)
    seed = StrictInteger(allow_none=True)  # llama.cpp's extension, as on the other endpoints
    stream = StrictBoolean(allow_none=True)
    tools = fields.List(fields.Nested(FunctionToolSchema), allow_none=True, validate=validate.Length(max=128))
    tool_choice = ToolChoiceField(allow_none=True)
    parallel_tool_calls = StrictBoolean(allow_none=True)
    text = fields.Nested(TextSchema, allow_none=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True)
    user = fields.String(allow_none=True)
    store = StrictBoolean(allow_none=True)  # OpenAI's default is true; LLM_STORE=off keeps nothing
    previous_response_id = fields.String(allow_none=True, validate=validate.Length(min=1, max=80))
    background = StrictBoolean(allow_none=True)
    conversation = fields.Raw(allow_none=True)  # an id, or {"id": ...}
    include = fields.List(fields.String(), allow_none=True)
    truncation = fields.String(allow_none=True, validate=validate.OneOf(["auto", "disabled"]))
    reasoning = fields.Dict(allow_none=True)  # its `effort` goes to the chat template

    @validates_schema
    def supported(self, data: dict[str, Any], **kwargs: Any) -> None:
        """What this server does not do yet is refused, not ignored; tool choices must name tools."""
        if data.get("conversation") is not None:
            raise ValidationError(
                "conversations are not supported by this server yet: use previous_response_id, "
                "or send the whole conversation in input",
                "conversation",
            )
        if data.get("background"):
            raise ValidationError(
                "background responses are not supported by this server yet: leave background unset "
                "(stream instead)",
                "background",
            )
        choice = data.get("tool_choice")
        names = {tool["name"] for tool in data.get("tools") or []}
        if choice == "required" and not names:
            raise ValidationError("'required' needs tools", "tool_choice")
        if isinstance(choice, dict) and choice["name"] not in names:
            raise ValidationError(f"names {choice['name']!r}, which is not in tools", "tool_choice")


class InputTokensRequestSchema(ResponseRequestSchema):
    """`POST /v1/responses/input_tokens`: the same input, counted after the chat template."""


class InputItemsQuerySchema(BaseSchema):
    """`GET /v1/responses/{id}/input_items`: a page of the items, as OpenAI pages lists."""

    after = fields.String(validate=validate.Length(min=1, max=80))
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 100))
    order = fields.String(load_default="desc", validate=validate.OneOf(["asc", "desc"]))
    include = fields.List(fields.String())


class RetrieveQuerySchema(BaseSchema):
    """`GET /v1/responses/{id}`: `stream` and `starting_after` replay a background response."""

    stream = fields.Boolean(load_default=False)
    starting_after = fields.Integer(validate=validate.Range(min=0))
    include = fields.List(fields.String())


response_request_schema = ResponseRequestSchema()
input_items_query_schema = InputItemsQuerySchema()
retrieve_query_schema = RetrieveQuerySchema()
input_tokens_request_schema = InputTokensRequestSchema()
