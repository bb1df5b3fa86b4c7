"""A Responses request's `mcp` tools: which servers (cleared against LLM_MCP_ALLOW), which of their
tools the model may call, which calls wait for the client's approval."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.api.http import destinations
from app.api.http.errors import InvalidRequestError
from app.mcp import client
from app.mcp.client import Limits, McpError, McpServer, Pin
from app.settings.current import current_config


@dataclass(frozen=True)
class McpTool:
    """A request's mcp tool: the server, which of its tools the model may call, which need approval."""

    server: McpServer
    allowed: frozenset[str] | None
    approval: str | dict[str, Any]

    def needs_approval(self, name: str) -> bool:
        return needs_approval(self.approval, name)


def needs_approval(policy: str | dict[str, Any], name: str) -> bool:
    """OpenAI's rule: every call needs approval unless "never", or the tool is named under "never"."""
    if isinstance(policy, str):
        return policy != "never"
    never = set((policy.get("never") or {}).get("tool_names") or [])
    return name not in never


def requested(body: dict[str, Any]) -> dict[str, McpTool]:
    """The request's mcp tools by label: a server the operator configured (LLM_MCP_SERVERS) named by
    its label alone, or a server_url cleared against LLM_MCP_ALLOW (a 400 otherwise)."""
    found = {}
    for index, tool in enumerate(body.get("tools") or []):
        if tool["type"] != "mcp":
            continue
        if tool.get("server_url"):
            server = _named_by_url(tool, f"tools[{index}].server_url")
        else:
            server = _configured(tool, f"tools[{index}].server_label")
        allowed = tool.get("allowed_tools")
        found[tool["server_label"]] = McpTool(
            server, None if allowed is None else frozenset(allowed), tool.get("require_approval") or "always"
        )
    return found


def _named_by_url(tool: dict[str, Any], param: str) -> McpServer:
    allowlist = current_config().mcp_allow
    if not allowlist:
        raise InvalidRequestError(
            "this server calls no MCP servers a request names (LLM_MCP_ALLOW is empty)", param=param
        )
    try:
        target = destinations.cleared(tool["server_url"], allowlist, "LLM_MCP_ALLOW", "calls MCP servers on")
    except destinations.RefusedError as refused:
        raise InvalidRequestError(str(refused), param=param) from None
    pin = Pin(target.host, target.address, target.port)
    return McpServer(tool["server_label"], tool["server_url"], pin, headers=dict(tool.get("headers") or {}))


def _configured(tool: dict[str, Any], param: str) -> McpServer:
    label = tool["server_label"]
    config = next((c for c in current_config().mcp_servers if c.name == label), None)
    if config is None:
        raise InvalidRequestError(
            f"the mcp tool {label!r} has no server_url, and the server configures no MCP server of that name "
            "(LLM_MCP_SERVERS)",
            param=param,
        )
    # The operator's headers over the request's: a client does not replace the server's credentials.
    headers = {**(tool.get("headers") or {}), **dict(config.headers)}
    return McpServer(label, config.url or "", None, config.command or (), headers)


def listed_tool(tool: client.Tool) -> dict[str, Any]:
    """A tool as an mcp_list_tools item lists it."""
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": tool.annotations,
    }


Listings = dict[str, list[dict[str, Any]]]  # each server's label -> its tools, as listed


def offered(servers: dict[str, McpTool], listed: Listings) -> list[dict[str, Any]]:
    """The listed tools the model may call, as function tools for the chat template."""
    return [
        {
            "type": "function",
            "name": t["name"],
            "description": t.get("description"),
            "parameters": t["input_schema"],
        }
        for label, tools in listed.items()
        for t in tools
        if _allowed(servers[label], t["name"])
    ]


def server_of(name: str, servers: dict[str, McpTool], listed: Listings) -> str | None:
    """The label of the server whose listed (and allowed) tool `name` is; the first that has it."""
    for label, tools in listed.items():
        if any(t["name"] == name for t in tools) and _allowed(servers[label], name):
            return label
    return None


def as_chat_choice(choice: str | dict[str, str] | None) -> str | dict[str, str] | None:
    """A tool_choice naming an MCP server's tool as the chat request takes it (a server alone: required)."""
    if isinstance(choice, dict) and "server_label" in choice:
        return {"name": choice["name"]} if choice.get("name") else "required"
    return choice


def made(tool: McpTool, name: str, arguments: str, limits: Limits) -> tuple[str | None, str | None]:
    """Call `name` with the model's `arguments`: its output, or the error."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as bad:  # e.g. cut short by max_output_tokens
        return None, f"the model's arguments are not JSON ({bad}); the call was not made"
    if not isinstance(parsed, dict):
        return None, "the model's arguments are not a JSON object; the call was not made"
    try:
        return client.call_tool(tool.server, name, parsed, limits), None
    except McpError as failed:
        return None, str(failed)


def _allowed(tool: McpTool, name: str) -> bool:
    return tool.allowed is None or name in tool.allowed
