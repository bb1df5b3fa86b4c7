"""The tools family in the OpenAPI document: llama-server's GET /tools and POST /tools."""

from __future__ import annotations

from app.api.http.openapi import Component, json_doc, operation
from app.api.tools.schemas import ToolCallSchema

_STR, _OBJ = {"type": "string"}, {"type": "object"}
_TOOL = {
    "type": "object",
    "required": ["tool", "display_name", "type", "permissions", "definition"],
    "properties": {
        "tool": {"type": "string", "description": "`<server>_<tool>`: the name POST /tools takes"},
        "display_name": _STR,
        "type": {"const": "mcp"},
        "server": {"type": "string", "description": "The LLM_MCP_SERVERS label (not in llama-server's)"},
        "permissions": {"type": "object", "properties": {"write": {"type": "boolean"}}},
        "uses_cwd": {"type": "boolean"},
        "definition": {"type": "object", "description": "The tool as a chat completions function tool"},
    },
}
_RESULT = {
    "type": "object",
    "properties": {
        "plain_text_response": {"type": "string", "description": "The tool's text output"},
        "error": {"type": "string", "description": "Why the server or the tool failed"},
    },
}


# The operator's MCP servers' tools (LLM_MCP_SERVERS); 403 when it configures none.
COMPONENTS: dict[str, Component] = {
    "ServerTools": {"type": "array", "items": _TOOL},
    "ServerToolCall": ToolCallSchema,
    "ServerToolResult": _RESULT,
}


TOOLS = operation(
    "The tools of the MCP servers the operator configures, as llama-server lists them",
    json_doc("The tools.", "ServerTools"),
    (401, 403),
)
CALL = operation(
    "Call one of them: its text output, or the error it met",
    json_doc("The output or the error.", "ServerToolResult"),
    (400, 401, 403, 404),
    body="ServerToolCall",
)
