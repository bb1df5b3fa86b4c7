"""Marshmallow schemas of a Responses API request: input items, function tools, text format."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.http.fields import StrictBoolean, StrictInteger, count, number, priority_field
from app.api.http.schemas import BaseSchema
from app.api.prompting.items import normalized_input
from app.api.requests.generation import sampling_of
from app.api.responses.request import ResponseRequest


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


class FunctionToolSchema(BaseSchema):
    """A function tool, as the Responses API writes it (flat, not under `function`)."""

    type = fields.String(
        required=True, validate=validate.Equal("function", error="only function tools are supported")
    )
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    parameters = fields.Dict(allow_none=True)
    strict = StrictBoolean(allow_none=True)


class GrammarFormatSchema(BaseSchema):
    """A custom tool's input format: free text, or text following a Lark grammar or a regex."""

    type = fields.String(required=True, validate=validate.OneOf(["text", "grammar"]))
    syntax = fields.String(validate=validate.OneOf(["lark", "regex"]))
    definition = fields.String(validate=validate.Length(min=1, max=100_000))

    @validates_schema
    def grammar_given(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data["type"] == "grammar" and (not data.get("syntax") or not data.get("definition")):
            raise ValidationError("a grammar format needs its syntax and definition", "definition")


class CustomToolSchema(BaseSchema):
    """A custom tool: the model calls it with free-form text (held to its grammar, if it gives one)."""

    type = fields.String(required=True, validate=validate.Equal("custom"))
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    format = fields.Nested(GrammarFormatSchema, allow_none=True)


class NamespacedToolField(fields.Field[dict[str, Any]]):
    """One tool of a namespace: a function or a custom tool."""

    OPENAPI = {"type": "object", "description": "A function or custom tool"}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, Any]:
        kind = value.get("type") if isinstance(value, dict) else None
        schema = CustomToolSchema() if kind == "custom" else FunctionToolSchema()
        loaded: dict[str, Any] = schema.load(value)
        return loaded


class NamespaceToolSchema(BaseSchema):
    """Tools grouped under a name (Codex's): the model calls them as `<namespace>.<name>`."""

    type = fields.String(required=True, validate=validate.Equal("namespace"))
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    tools = fields.List(NamespacedToolField(), required=True, validate=validate.Length(min=1, max=128))


class ToolFilterSchema(BaseSchema):
    """OpenAI's tool filter: tools by name, and/or by whether the server annotates them read-only."""

    tool_names = fields.List(fields.String(), allow_none=True, validate=validate.Length(max=256))
    read_only = StrictBoolean(allow_none=True)


class ApprovalSchema(BaseSchema):
    """`require_approval` as an object: the tools that never, or always, need the client's approval."""

    never = fields.Nested(ToolFilterSchema, allow_none=True)
    always = fields.Nested(ToolFilterSchema, allow_none=True)


class ApprovalField(fields.Field[str | dict[str, Any]]):
    """`require_approval`: "always", "never", or {"never": {"tool_names": [...]}, "always": {...}}."""

    OPENAPI = {"anyOf": [{"enum": ["always", "never"]}, {"type": "object"}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | dict[str, Any]:
        if value in ("always", "never"):
            return str(value)
        if isinstance(value, dict):
            loaded: dict[str, Any] = ApprovalSchema().load(value)
            return loaded
        raise ValidationError("must be 'always', 'never' or {'never': {'tool_names': [...]}}")


class AllowedToolsField(fields.Field[list[str] | dict[str, Any]]):
    """`allowed_tools`: a list of tool names, or a filter ({"tool_names": [...], "read_only": true})."""

    OPENAPI = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]}

    def _deserialize(
        self, value: Any, attr: str | None, data: Any, **kwargs: Any
    ) -> list[str] | dict[str, Any]:
        if isinstance(value, list) and all(isinstance(n, str) for n in value):
            return list(value)
        if isinstance(value, dict):
            loaded: dict[str, Any] = ToolFilterSchema().load(value)
            if loaded.get("tool_names") is not None or loaded.get("read_only") is not None:
                return loaded
        raise ValidationError("must be a list of tool names or {'tool_names': [...], 'read_only': ...}")


class McpToolSchema(BaseSchema):
    """A remote MCP server whose tools the server lists, offers the model and calls itself."""

    type = fields.String(required=True, validate=validate.Equal("mcp"))
    server_label = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    # Absent: the server the operator configured under this label (LLM_MCP_SERVERS).
    server_url = fields.String(allow_none=True, validate=validate.Length(min=1, max=2048))
    server_description = fields.String(allow_none=True)
    headers = fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True)
    authorization = fields.String(allow_none=True, validate=validate.Length(min=1, max=8192))
    # OpenAI's hosted connectors and tunnels: taken only to be refused by name (mcp_tools.requested).
    connector_id = fields.String(allow_none=True)
    tunnel_id = fields.String(allow_none=True)
    allowed_tools = AllowedToolsField(allow_none=True)
    require_approval = ApprovalField(allow_none=True)


class ToolField(fields.Field[dict[str, Any]]):
    """One tool: a function or custom tool the client runs (maybe in a namespace), an MCP server the
    server calls, or a tool OpenAI runs (web_search...), which this server leaves out (tool_kinds.py)."""

    OPENAPI = {
        "type": "object",
        "description": "A function, custom or namespace tool, or an mcp tool (server_label, server_url...); "
        "hosted tool types (web_search, file_search...) are left out, named in X-Skipped-Tools",
    }
    SCHEMAS = {"mcp": McpToolSchema, "function": FunctionToolSchema, "custom": CustomToolSchema,
               "namespace": NamespaceToolSchema}  # fmt: skip

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, Any]:
        kind = value.get("type") if isinstance(value, dict) else None
        if not isinstance(kind, str) or not kind:
            raise ValidationError({"type": ["a tool needs a type"]})
        if kind not in self.SCHEMAS:
            return {"type": kind}  # a hosted tool: left out
        loaded: dict[str, Any] = self.SCHEMAS[kind]().load(value)
        return loaded


class ToolChoiceField(fields.Field[str | dict[str, str]]):
    """`tool_choice`: none, auto, required, {"type": "function" | "custom", "name": ...} (a namespaced
    function's with its `namespace`), or {"type": "mcp", "server_label"}."""

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
        named = isinstance(value, dict) and isinstance(value.get("name"), str)
        if named and value.get("type") in ("function", "custom"):
            namespace = value.get("namespace")
            return {"name": value["name"], **({"namespace": namespace} if isinstance(namespace, str) else {})}
        if (
            isinstance(value, dict)
            and value.get("type") == "mcp"
            and isinstance(value.get("server_label"), str)
        ):
            name = value.get("name")
            if name is None or isinstance(name, str):
                return {"server_label": value["server_label"], **({"name": name} if name else {})}
        raise ValidationError(
            "must be 'none', 'auto', 'required', {'type': 'function' or 'custom', 'name': ...} or "
            "{'type': 'mcp', 'server_label': ..., 'name': ...}"
        )


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


class ConversationField(fields.Field[str]):
    """`conversation`: the id of the conversation a request continues, as a string or {"id": ...}."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"id": {"type": "string"}}}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        given = value.get("id") if isinstance(value, dict) else value
        if not isinstance(given, str) or not given:
            raise ValidationError("must be a conversation id, or {'id': ...}")
        return given


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
    tools = fields.List(ToolField(), allow_none=True, validate=validate.Length(max=128))
    max_tool_calls = count(1)  # calls to MCP tools the server makes for this response, at most
    tool_choice = ToolChoiceField(allow_none=True)
    parallel_tool_calls = StrictBoolean(allow_none=True)
    text = fields.Nested(TextSchema, allow_none=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True)
    user = fields.String(allow_none=True)
    store = StrictBoolean(allow_none=True)  # OpenAI's default is true; LLM_STORE=off keeps nothing
    previous_response_id = fields.String(allow_none=True, validate=validate.Length(min=1, max=80))
    background = StrictBoolean(allow_none=True)
    conversation = ConversationField(allow_none=True)
    include = fields.List(fields.String(), allow_none=True)  # "message.output_text.logprobs" is read
    top_logprobs = count(0, 20)
    priority = priority_field()  # vLLM's: a waiting request with a lower value starts first
    truncation = fields.String(allow_none=True, validate=validate.OneOf(["auto", "disabled"]))
    reasoning = fields.Dict(allow_none=True)  # its `effort` goes to the chat template
    # llama-server's: while the prompt evaluates, `response.in_progress` again with `prompt_progress`.
    return_progress = StrictBoolean(allow_none=True)
    # OpenAI's: requests that share a key go to the same worker (and its cache).
    prompt_cache_key = fields.String(allow_none=True, validate=validate.Length(max=1024))
    # vLLM's: only requests with the same salt (and of the same tenant) share cached prompts.
    cache_salt = fields.String(allow_none=True, validate=validate.Length(min=1, max=256))

    @validates_schema
    def consistent(self, data: dict[str, Any], **kwargs: Any) -> None:
        """A background response must be kept; tool choices must name tools."""
        if data.get("background") and data.get("store") is False:
            raise ValidationError("a background response is kept to be polled: it needs store", "background")
        if data.get("conversation") and data.get("previous_response_id"):
            raise ValidationError("cannot be used with previous_response_id", "conversation")
        choice = data.get("tool_choice")
        tools = data.get("tools") or []
        names = {tool["name"] for tool in tools if tool["type"] in ("function", "custom")}
        names |= {member["name"] for tool in tools if tool["type"] == "namespace" for member in tool["tools"]}
        labels = [tool["server_label"] for tool in tools if tool["type"] == "mcp"]
        if len(set(labels)) < len(labels):
            raise ValidationError("two mcp tools have the same server_label", "tools")
        if choice == "required" and not tools:
            raise ValidationError("'required' needs tools", "tool_choice")
        if isinstance(choice, dict) and "server_label" in choice:
            if choice["server_label"] not in labels:
                raise ValidationError(f"names server {choice['server_label']!r}, not in tools", "tool_choice")
        elif isinstance(choice, dict) and choice["name"] not in names:
            raise ValidationError(f"names {choice['name']!r}, which is not in tools", "tool_choice")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> ResponseRequest:
        return typed(data)


def typed(data: dict[str, Any]) -> ResponseRequest:
    """The loaded fields as the typed request (those left out: their defaults there)."""
    return ResponseRequest(
        input=tuple(data["input"]),
        model=data.get("model"),
        instructions=data.get("instructions"),
        max_output_tokens=data.get("max_output_tokens"),
        sampling=sampling_of(data),
        stream=bool(data.get("stream")),
        tools=tuple(data.get("tools") or ()),
        max_tool_calls=data.get("max_tool_calls"),
        tool_choice=data.get("tool_choice"),
        parallel_tool_calls=data.get("parallel_tool_calls"),
        text_format=(data.get("text") or {}).get("format"),
        metadata=data.get("metadata") or {},
        user=data.get("user"),
        store=data.get("store") is not False,
        previous_response_id=data.get("previous_response_id"),
        conversation=data.get("conversation"),
        background=bool(data.get("background")),
        include=frozenset(data.get("include") or ()),
        top_logprobs=data.get("top_logprobs"),
        priority=data.get("priority") or 0,
        truncation=data.get("truncation"),
        reasoning_effort=(data.get("reasoning") or {}).get("effort"),
        return_progress=bool(data.get("return_progress")),
        prompt_cache_key=data.get("prompt_cache_key"),
        cache_salt=data.get("cache_salt"),
    )


class InputTokensRequestSchema(ResponseRequestSchema):
    """`POST /v1/responses/input_tokens`: the same input, counted after the chat template."""


class CompactRequestSchema(BaseSchema):
    """`POST /v1/responses/compact`: the conversation to shorten (its input, or a stored chain)."""

    model = fields.String(allow_none=True)
    input = InputField(load_default=list)
    instructions = fields.String(allow_none=True)
    previous_response_id = fields.String(allow_none=True, validate=validate.Length(min=1, max=80))
    prompt_cache_key = fields.String(allow_none=True, validate=validate.Length(max=1024))

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> ResponseRequest:
        return typed(data)


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
compact_request_schema = CompactRequestSchema()
