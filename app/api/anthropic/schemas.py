"""Marshmallow schemas of an Anthropic Messages request: content blocks, system, tools, tool_choice."""

from __future__ import annotations

from functools import partial
from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.anthropic import conversion, pins
from app.api.anthropic.blocks import ContentField, SystemField
from app.api.anthropic.request import MessagesRequest
from app.api.http.fields import StrictBoolean, count, number
from app.api.http.schemas import BaseSchema
from app.api.requests.chat import ChatRequest


class InputMessageSchema(BaseSchema):
    # "system": instructions mid-conversation, as Claude Code sends them (system_turns.py places them).
    role = fields.String(required=True, validate=validate.OneOf(["user", "assistant", "system"]))
    content = ContentField(required=True)


class ClientToolSchema(BaseSchema):
    """A client tool: name, description and the JSON schema of its input."""

    type = fields.String(validate=validate.Equal("custom", error="only client tools (custom) are supported"))
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    input_schema = fields.Dict(required=True)
    # Tool search: offered to the model only once a tool_reference or a tool_addition loads it.
    defer_loading = StrictBoolean(allow_none=True)


# Tools Anthropic runs itself, or whose schema only Claude models know (web_search_20250305,
# code_execution_..., bash_..., text_editor_..., tool_search_tool_...): left out, with a warning in
# the log and a header (skipped_tools.py), as llama-server skips the tool types it lacks.
SKIPPED = "skipped"


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
        kind = value.get("type") if isinstance(value, dict) else None
        if isinstance(value, dict) and isinstance(kind, str) and kind not in ("custom", "mcp_toolset"):
            return {"type": SKIPPED, "kind": kind, "name": str(value.get("name") or kind)}
        schema = McpToolsetSchema() if kind == "mcp_toolset" else ClientToolSchema()
        loaded: dict[str, Any] = schema.load(value)
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
    # "omitted": thinking blocks carry no text, only their signature (the thinking, sealed).
    display = fields.String(allow_none=True, validate=validate.OneOf(("summarized", "omitted")))


class OutputConfigSchema(BaseSchema):
    """`output_config`: how much effort (a thinking budget here), and the answer's format."""

    effort = fields.String(allow_none=True, validate=validate.OneOf(conversion.EFFORTS))
    format = fields.Dict(allow_none=True)  # {"type": "json_schema", "schema": {...}}


class ContextEditSchema(BaseSchema):
    """One of `context_management.edits`: clear earlier thinking, or earlier tool results."""

    type = fields.String(required=True, validate=validate.OneOf(conversion.EDITS))
    keep = fields.Raw(allow_none=True)  # "all" | {"type": "thinking_turns" | "tool_uses", "value": n}
    trigger = fields.Dict(allow_none=True)  # {"type": "input_tokens" | "tool_uses", "value": n}
    clear_at_least = fields.Dict(allow_none=True)  # {"type": "input_tokens", "value": n}
    exclude_tools = fields.List(fields.String(), allow_none=True)
    clear_tool_inputs = fields.Raw(allow_none=True)  # true, or a list of tool names


class ContextManagementSchema(BaseSchema):
    edits = fields.List(fields.Nested(ContextEditSchema), allow_none=True, validate=validate.Length(max=8))


class CountTokensRequestSchema(BaseSchema):
    """`POST /v1/messages/count_tokens`: what the prompt of a Messages request would be."""

    model = fields.String(required=True)
    messages = fields.List(fields.Nested(InputMessageSchema), required=True, validate=validate.Length(min=1))
    system = SystemField(allow_none=True)
    tools = fields.List(ToolField(), allow_none=True, validate=validate.Length(max=128))
    tool_choice = fields.Nested(ClientToolChoiceSchema, allow_none=True)
    thinking = fields.Nested(ThinkingSchema, allow_none=True)
    output_config = fields.Nested(OutputConfigSchema, allow_none=True)
    context_management = fields.Nested(ContextManagementSchema, allow_none=True)
    mcp_servers = fields.List(
        fields.Nested(McpServerSchema), allow_none=True, validate=validate.Length(max=20)
    )

    @validates_schema
    def tool_choice_names_a_tool(self, data: dict[str, Any], **kwargs: Any) -> None:
        choice = data.get("tool_choice") or {}
        names = {
            tool["name"]
            for tool in data.get("tools") or []
            if tool.get("type") not in ("mcp_toolset", SKIPPED)
        }
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

    @post_load(pass_original=True)
    def typed(self, data: dict[str, Any], original: dict[str, Any], **kwargs: Any) -> MessagesRequest:
        """The chat it amounts to (conversion.py), and Anthropic's own parts, read here once."""
        tools = data.get("tools") or []
        marked = pins.marked_body(original)
        return MessagesRequest(
            chat=conversion.as_chat(data),
            skipped_tools=tuple(tool["kind"] for tool in tools if tool.get("type") == SKIPPED),
            mcp_servers=tuple(data.get("mcp_servers") or ()),
            mcp_toolsets={t["mcp_server_name"]: t for t in tools if t.get("type") == "mcp_toolset"},
            marked=None if marked is None else partial(count_tokens_request_schema.load, marked),
            pin_seconds=pins.pin_seconds(original),
            context_management=bool(data.get("context_management")),
        )


messages_request_schema = MessagesRequestSchema()
count_tokens_request_schema = CountTokensRequestSchema()
