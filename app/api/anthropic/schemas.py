"""Marshmallow schemas of an Anthropic Messages request: content blocks, system, tools, tool_choice."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.anthropic import conversion
from app.api.http import fetch, media
from app.api.http.fields import StrictBoolean, count, number
from app.api.http.media import MediaError
from app.api.http.schemas import BaseSchema
from app.api.requests.chat import ChatRequest


def _text_blocks(content: Any, where: str) -> str:
    """A string, or text blocks, as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError(f"{where}: must be a string or a list of text blocks")
    texts = []
    for index, block in enumerate(content):
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            kind = block.get("type") if isinstance(block, dict) else None
            raise ValidationError(f"{where}[{index}]: block type {kind!r} is not supported here; use text")
        texts.append(block["text"])
    return "".join(texts)


def _image_source(source: Any, where: str) -> bytes:
    """An image block's bytes: {"type": "base64", "media_type", "data"} or {"type": "url", "url"}."""
    kind = source.get("type") if isinstance(source, dict) else None
    try:
        if kind == "base64" and isinstance(source.get("data"), str):
            return media.from_base64(source["data"], "source.data")
        if kind == "url" and isinstance(source.get("url"), str):
            return fetch.media_at(source["url"], "source.url")
    except MediaError as exc:
        raise ValidationError(f"{where}.{exc.field}: {exc}") from None
    raise ValidationError(
        f'{where}.source: must be {{"type": "base64", "media_type", "data"}} or {{"type": "url", "url"}}'
    )


def _server_call_block(block: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """An mcp_tool_use or mcp_tool_result block handed back in a later turn."""
    if kind == "mcp_tool_use":
        if not all(isinstance(block.get(k), str) for k in ("id", "name", "server_name")):
            raise ValidationError(f"{where}: an mcp_tool_use block needs an id, a name and a server_name")
        if not isinstance(block.get("input"), dict):
            raise ValidationError(f"{where}.input: must be an object")
        return {k: block[k] for k in ("type", "id", "name", "server_name", "input")}
    if not isinstance(block.get("tool_use_id"), str):
        raise ValidationError(f"{where}.tool_use_id: must be a string")
    text = _text_blocks(block.get("content") or "", f"{where}.content")
    return {
        "type": kind,
        "tool_use_id": block["tool_use_id"],
        "content": text,
        "is_error": block.get("is_error") is True,
    }


class SystemField(fields.Field[str]):
    """`system`: a string or a list of text blocks."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        return _text_blocks(value, "")


class ContentField(fields.Field[list[dict[str, Any]]]):
    """A message's `content`: a string or blocks (text, tool_use, tool_result), normalised to blocks."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        if not isinstance(value, list):
            raise ValidationError("must be a string or a list of content blocks")
        return [self._block(block, f"[{index}]") for index, block in enumerate(value)]

    def _block(self, block: Any, where: str) -> dict[str, Any]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            return {"type": "text", "text": block["text"]}
        if kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise ValidationError(f"{where}: a tool_use block needs an id and a name")
            if not isinstance(block.get("input"), dict):
                raise ValidationError(f"{where}.input: must be an object")
            return {k: block[k] for k in ("type", "id", "name", "input")}
        if kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise ValidationError(f"{where}.tool_use_id: must be a string")
            text = _text_blocks(block.get("content") or "", f"{where}.content")
            return {"type": kind, "tool_use_id": block["tool_use_id"], "content": text}
        if kind in ("mcp_tool_use", "mcp_tool_result"):  # calls the server made (the MCP connector)
            return _server_call_block(block, kind, where)
        if kind == "thinking":  # the model's own thinking, handed back for its template
            return {
                "type": kind,
                "thinking": block.get("thinking") if isinstance(block.get("thinking"), str) else "",
            }
        if kind == "redacted_thinking":  # encrypted by Anthropic: nothing a local model can read
            return {"type": kind}
        if kind == "image":  # as text that carries it (app/api/http/media.py), where the block stood
            try:
                return {
                    "type": "text",
                    "text": media.embed("image", _image_source(block.get("source"), where)),
                }
            except MediaError as exc:
                raise ValidationError(f"{where}.source: {exc}") from None
        raise ValidationError(f"{where}.type: content block type {kind!r} is not supported by this server")


class InputMessageSchema(BaseSchema):
    role = fields.String(required=True, validate=validate.OneOf(["user", "assistant"]))
    content = ContentField(required=True)


class ClientToolSchema(BaseSchema):
    """A client tool: name, description and the JSON schema of its input."""

    type = fields.String(validate=validate.Equal("custom", error="only client tools (custom) are supported"))
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    input_schema = fields.Dict(required=True)


class ToolConfigSchema(BaseSchema):
    enabled = StrictBoolean(allow_none=True)
    defer_loading = StrictBoolean(allow_none=True)


class McpToolsetSchema(BaseSchema):
    """The MCP connector's `mcp_toolset` tool (mcp-client-2025-11-20): which of a server's tools are on."""

    type = fields.String(required=True, validate=validate.Equal("mcp_toolset"))
    mcp_server_name = fields.String(required=True)
    default_config = fields.Nested(ToolConfigSchema, allow_none=True)
    configs = fields.Dict(keys=fields.String(), values=fields.Nested(ToolConfigSchema), allow_none=True)


class ToolField(fields.Field[dict[str, Any]]):
    """A client tool, or an MCP server's toolset (the MCP connector)."""

    OPENAPI = {"type": "object", "description": "A client tool (custom), or an mcp_toolset"}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, Any]:
        schema = (
            McpToolsetSchema() if isinstance(value, dict) and value.get("type") == "mcp_toolset" else None
        )
        loaded: dict[str, Any] = (schema or ClientToolSchema()).load(value)
        return loaded


class McpToolConfigurationSchema(BaseSchema):
    enabled = StrictBoolean(allow_none=True)
    allowed_tools = fields.List(fields.String(), allow_none=True)


class McpServerSchema(BaseSchema):
    """One of `mcp_servers` (the MCP connector): a server this server calls for the model."""

    type = fields.String(required=True, validate=validate.Equal("url"))
    url = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    authorization_token = fields.String(allow_none=True)
    tool_configuration = fields.Nested(McpToolConfigurationSchema, allow_none=True)


class ClientToolChoiceSchema(BaseSchema):
    type = fields.String(required=True, validate=validate.OneOf(["auto", "any", "tool", "none"]))
    name = fields.String()
    disable_parallel_tool_use = StrictBoolean(allow_none=True)


class ThinkingSchema(BaseSchema):
    """`thinking`: whether a reasoning model thinks first (its template's enable_thinking)."""

    type = fields.String(required=True, validate=validate.OneOf(("enabled", "disabled", "adaptive")))
    budget_tokens = fields.Integer(validate=validate.Range(min=1))


class CountTokensRequestSchema(BaseSchema):
    """`POST /v1/messages/count_tokens`: what the prompt of a Messages request would be."""

    model = fields.String(required=True)
    messages = fields.List(fields.Nested(InputMessageSchema), required=True, validate=validate.Length(min=1))
    system = SystemField(allow_none=True)
    tools = fields.List(ToolField(), allow_none=True, validate=validate.Length(max=128))
    tool_choice = fields.Nested(ClientToolChoiceSchema, allow_none=True)
    thinking = fields.Nested(ThinkingSchema, allow_none=True)
    mcp_servers = fields.List(
        fields.Nested(McpServerSchema), allow_none=True, validate=validate.Length(max=20)
    )

    @validates_schema
    def tool_choice_names_a_tool(self, data: dict[str, Any], **kwargs: Any) -> None:
        choice = data.get("tool_choice") or {}
        names = {tool["name"] for tool in data.get("tools") or [] if tool.get("type") != "mcp_toolset"}
        servers = [server["name"] for server in data.get("mcp_servers") or []]
        if len(set(servers)) < len(servers):
            raise ValidationError("two MCP servers have the same name", "mcp_servers")
        for tool in data.get("tools") or []:
            if tool.get("type") == "mcp_toolset" and tool["mcp_server_name"] not in servers:
                raise ValidationError(
                    f"names MCP server {tool['mcp_server_name']!r}, not in mcp_servers", "tools"
                )
        if choice.get("type") in ("any", "tool") and not names and not servers:
            raise ValidationError(f"{choice['type']!r} needs tools", "tool_choice")
        if choice.get("type") == "tool" and choice.get("name") not in names and not servers:
            raise ValidationError(f"names {choice.get('name')!r}, which is not in tools", "tool_choice")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> ChatRequest:
        """The request as the typed chat request it amounts to (conversion.py)."""
        return conversion.as_chat(data)


class MessagesRequestSchema(CountTokensRequestSchema):
    """`POST /v1/messages`."""

    max_tokens = count(1)
    stop_sequences = fields.List(fields.String(), allow_none=True, validate=validate.Length(max=16))
    temperature = number(0, 1)
    top_p = number(0, 1, low_inclusive=False)
    top_k = count(0)
    stream = StrictBoolean(allow_none=True)
    metadata = fields.Dict(allow_none=True)
    # llama-server's: while the prompt evaluates, `ping` events with `prompt_progress`.
    return_progress = StrictBoolean(allow_none=True)

    @validates_schema
    def max_tokens_given(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("max_tokens") is None:
            raise ValidationError("Field required", "max_tokens")
        budget = (data.get("thinking") or {}).get("budget_tokens")
        if budget is not None and budget >= data["max_tokens"]:  # as Anthropic answers
            raise ValidationError("`max_tokens` must be greater than `thinking.budget_tokens`", "max_tokens")


messages_request_schema = MessagesRequestSchema()
count_tokens_request_schema = CountTokensRequestSchema()
