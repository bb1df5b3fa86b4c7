"""MCP servers a request's tools name, as every API family resolves and calls them: a URL cleared
against LLM_MCP_ALLOW, or a server the operator configured (LLM_MCP_SERVERS); which of their
tools the model may call; a call made with the model's arguments."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

import gevent

from app.api.http import destinations
from app.api.http.errors import InvalidRequestError
from app.mcp import client
from app.mcp.servers import Limits, McpError, McpServer, Pin, Tool
from app.settings.current import current_config
from app.telemetry import tool_metrics

Listed = dict[str, Any]  # a tool as an mcp_list_tools item lists it: name, description, schema, annotations
Rule = Callable[[Listed], bool]  # a protocol's rule about a listed tool (may the model call it? ask first?)


def every_tool(tool: Listed) -> bool:
    return True


def no_tool(tool: Listed) -> bool:
    return False


def only(names: Iterable[str]) -> Rule:
    """The rule that holds for these tools and no other."""
    chosen = frozenset(names)
    return lambda tool: tool["name"] in chosen


def all_but(names: Iterable[str]) -> Rule:
    """The rule that holds for every tool but these."""
    off = frozenset(names)
    return lambda tool: tool["name"] not in off


def read_only(tool: Listed) -> bool:
    """Whether the server annotates the tool as one that changes nothing (MCP's readOnlyHint)."""
    return bool((tool.get("annotations") or {}).get("readOnlyHint"))


@dataclass(frozen=True)
class McpTool:
    """A request's mcp tool: the server, which of its tools the model may call, which need approval."""

    server: McpServer
    allows: Rule = every_tool
    needs_approval: Rule = no_tool


def named_by_url(label: str, url: str, headers: dict[str, str], param: str) -> McpServer:
    """A server a request names by URL, if LLM_MCP_ALLOW lets it be reached (a 400 naming `param` if not)."""
    allowlist = current_config().mcp_allow
    if not allowlist:
        raise InvalidRequestError(
            "this server calls no MCP servers a request names (LLM_MCP_ALLOW is empty)", param=param
        )
    try:
        target = destinations.cleared(url, allowlist, "LLM_MCP_ALLOW", "calls MCP servers on")
    except destinations.RefusedError as refused:
        raise InvalidRequestError(str(refused), param=param) from None
    pin = Pin(target.host, target.address, target.port)
    return McpServer(label, url, pin, headers=headers)


def configured(label: str, headers: dict[str, str], param: str) -> McpServer:
    """The server the operator configured under `label` (a 400 naming `param` if none)."""
    config = next((c for c in current_config().mcp_servers if c.name == label), None)
    if config is None:
        raise InvalidRequestError(
            f"the mcp tool {label!r} has no server_url, and the server configures no MCP server of that name "
            "(LLM_MCP_SERVERS)",
            param=param,
        )
    # The operator's headers over the request's: a client does not replace the server's credentials.
    headers = {**headers, **dict(config.headers)}
    return McpServer(label, config.url or "", None, config.command or (), headers)


def listed_tool(tool: Tool) -> Listed:
    """A tool as an mcp_list_tools item lists it."""
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": tool.annotations,
    }


Listings = dict[str, list[Listed]]  # each server's label -> its tools, as listed


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
        if servers[label].allows(t)
    ]


def found(name: str, servers: dict[str, McpTool], listed: Listings) -> tuple[str, Listed] | None:
    """The label of the server whose listed (and allowed) tool `name` is, the first that has it, and
    the tool as listed."""
    for label, tools in listed.items():
        for tool in tools:
            if tool["name"] == name and servers[label].allows(tool):
                return label, tool
    return None


def server_of(name: str, servers: dict[str, McpTool], listed: Listings) -> str | None:
    hit = found(name, servers, listed)
    return None if hit is None else hit[0]


def listing(server: McpServer, limits: Limits) -> list[Tool]:
    """The server's tools (McpError if it cannot say), counted in the metrics."""
    try:
        tools = client.list_tools(server, limits)
    except McpError:
        tool_metrics.listed(_metric_name(server), failed=True)
        raise
    tool_metrics.listed(_metric_name(server), failed=False)
    return tools


def call(server: McpServer, name: str, arguments: dict[str, Any], limits: Limits) -> str:
    """The tool's output (McpError if the call fails), counted and timed in the metrics."""
    started = time.monotonic()
    try:
        output = client.call_tool(server, name, arguments, limits)
    except McpError:
        tool_metrics.called(_metric_name(server), time.monotonic() - started, failed=True)
        raise
    tool_metrics.called(_metric_name(server), time.monotonic() - started, failed=False)
    return output


def _metric_name(server: McpServer) -> str:
    """The operator's name for a configured server, or the host of a request's URL (both bounded)."""
    return server.label if server.pin is None else server.pin.host


def made(tool: McpTool, name: str, arguments: str, limits: Limits) -> tuple[str | None, str | None]:
    """Call `name` with the model's `arguments`: its output, or the error."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as bad:  # e.g. cut short by max_output_tokens
        return None, f"the model's arguments are not JSON ({bad}); the call was not made"
    if not isinstance(parsed, dict):
        return None, "the model's arguments are not a JSON object; the call was not made"
    try:
        return call(tool.server, name, parsed, limits), None
    except McpError as failed:
        return None, str(failed)


def made_beating(
    tool: McpTool, name: str, arguments: str, limits: Limits, beat: bytes
) -> Generator[bytes, None, tuple[str | None, str | None]]:
    """`made`, yielding `beat` (a stream's keep-alive) every LLM_SSE_KEEPALIVE seconds while the call
    waits, so that a client or a proxy reading the stream does not take it for dead."""
    every = current_config().sse_keepalive
    job = gevent.spawn(made, tool, name, arguments, limits)
    try:
        job.join(timeout=every or None)
        while not job.ready():
            yield beat
            job.join(timeout=every)
    finally:  # the client hung up while the call waited: the call ends with the stream
        job.kill(block=False)
    result: tuple[str | None, str | None] = job.get()
    return result
