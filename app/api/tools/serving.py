"""The operator's MCP tools served: every configured server's tools listed at once (each listing
kept LISTING_SECONDS by this worker), and one tool called with the model's parameters."""

from __future__ import annotations

import logging
import time

import gevent
from flask import Response, jsonify

from app.api.generation import mcp_calls
from app.api.http.body import parse_json
from app.api.http.errors import InvalidRequestError, NotFoundError, PermissionDeniedError
from app.api.tools import listing
from app.api.tools.schemas import tool_call_schema
from app.mcp.servers import Limits, McpError, McpServer, Tool
from app.settings.config import Config
from app.settings.current import current_config
from app.settings.mcp_servers import McpServerConfig

log = logging.getLogger(__name__)


LISTING_SECONDS = 30.0


_listings: dict[str, tuple[float, list[Tool]]] = {}  # this worker's listings: label -> (when, tools)


def listed() -> Response:
    """Every configured server's tools, listed at once (one slow server holds up none of the others)."""
    config = _configured()
    servers = [_server(entry) for entry in config.mcp_servers]  # here: they read the request's settings
    jobs = [gevent.spawn(_listed, server, _limits(config)) for server in servers]
    gevent.joinall(jobs)
    listed = [(server.label, job.value or []) for server, job in zip(servers, jobs, strict=True)]
    return jsonify(listing.entries(listed))


def called() -> Response:
    """Call one tool with `params`: `{"plain_text_response": ...}`, or `{"error": ...}` when the
    server or the tool fails (200 both, as llama-server); 404 for a tool no server lists."""
    config = _configured()
    body = parse_json(tool_call_schema)
    if body["stream"]:
        raise InvalidRequestError(f'tool "{body["tool"]}" does not support stream = true', param="stream")
    found = listing.split(body["tool"], config.mcp_servers)
    server = None if found is None else _server(found[0])
    tools = None if server is None else _listed(server, _limits(config))
    if found is None or server is None or tools is None or not any(t.name == found[1] for t in tools):
        raise NotFoundError(f'unknown tool "{body["tool"]}"', param="tool")
    try:
        text = mcp_calls.call(server, found[1], body["params"], _limits(config))
    except McpError as failed:
        return jsonify({"error": str(failed)})
    return jsonify({"plain_text_response": text})


def _configured() -> Config:
    config = current_config()
    if not config.mcp_servers:
        raise PermissionDeniedError(
            "this feature is disabled: the server configures no MCP servers (LLM_MCP_SERVERS)"
        )
    return config


def _server(entry: McpServerConfig) -> McpServer:
    return mcp_calls.configured(entry.name, {}, "tool")


def _listed(server: McpServer, limits: Limits) -> list[Tool] | None:
    """The server's tools, as listed within LISTING_SECONDS; None (logged) if it cannot list them."""
    seen = _listings.get(server.label)
    if seen is not None and time.monotonic() - seen[0] < LISTING_SECONDS:
        return seen[1]
    try:
        tools = mcp_calls.listing(server, limits)
    except McpError as failed:
        log.warning("/tools: MCP server %s cannot list its tools: %s", server.label, failed)
        return None
    _listings[server.label] = (time.monotonic(), tools)
    return tools


def _limits(config: Config) -> Limits:
    return Limits(config.mcp_timeout, config.mcp_max_output_bytes)
