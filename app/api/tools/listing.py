"""The operator's MCP servers' tools under llama-server's names (`<server>_<tool>`), and back."""

from __future__ import annotations

from typing import Any

from app.mcp.servers import Tool
from app.settings.mcp_servers import McpServerConfig


def entry(server: str, tool: Tool) -> dict[str, Any]:
    """One tool as llama-server's GET /tools lists an MCP server's (plus `server`, its label, for
    pages that offer servers rather than tools)."""
    name = f"{server}_{tool.name}"
    return {
        "tool": name,
        "display_name": name,
        "type": "mcp",
        "server": server,
        "permissions": {"write": False},  # as llama-server: an MCP tool asks for no file access
        "uses_cwd": False,
        "definition": {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description or "",
                "parameters": tool.input_schema,
            },
        },
    }


def entries(listed: list[tuple[str, list[Tool]]]) -> list[dict[str, Any]]:
    """Every server's tools in order; a name already taken by an earlier one is left out (as
    llama-server leaves it out), so that each name calls one tool."""
    seen: set[str] = set()
    found = []
    for server, tools in listed:
        for tool in tools:
            made = entry(server, tool)
            if made["tool"] not in seen:
                seen.add(made["tool"])
                found.append(made)
    return found


def split(name: str, servers: tuple[McpServerConfig, ...]) -> tuple[McpServerConfig, str] | None:
    """The configured server `name` starts with (the longest such label: labels may hold `_`) and
    the tool name after it; None if no server's label begins it."""
    fitting = [s for s in servers if name.startswith(s.name + "_") and len(name) > len(s.name) + 1]
    if not fitting:
        return None
    server = max(fitting, key=lambda s: len(s.name))
    return server, name[len(server.name) + 1 :]
