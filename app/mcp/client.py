"""Listing an MCP server's tools and calling one, over streamable HTTP, with the official `mcp` SDK.

Every request is bounded: LLM_MCP_TIMEOUT for the whole exchange (connecting included) and
LLM_MCP_MAX_OUTPUT_BYTES for what comes back. What goes wrong comes back as an McpError whose
message names the server and the cause, never the request's headers (they carry credentials).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import gevent

from app.mcp import aio
from app.mcp.servers import Limits, McpError, McpServer, Tool

if TYPE_CHECKING:
    from mcp import Client

T = TypeVar("T")


def list_tools(server: McpServer, limits: Limits) -> list[Tool]:
    """The server's tools; McpError if it cannot say."""

    async def listing(client: Client) -> list[Tool]:
        found = await client.list_tools()
        return [
            Tool(
                t.name,
                t.description,
                dict(t.input_schema or {"type": "object"}),
                t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None,
            )
            for t in found.tools
        ]

    tools = _exchange(server, limits, listing, "listing its tools")
    if len(json.dumps([t.__dict__ for t in tools])) > limits.output_bytes:
        raise McpError(f"{server.label}: its tool listing is larger than LLM_MCP_MAX_OUTPUT_BYTES")
    return tools


def call_tool(server: McpServer, name: str, arguments: dict[str, Any], limits: Limits) -> str:
    """The tool's output as text; McpError if the call fails (the tool's own error included)."""

    async def calling(client: Client) -> tuple[bool, str]:
        result = await client.call_tool(name, arguments)
        texts = [getattr(part, "text", None) for part in result.content or []]
        text = "".join(t for t in texts if isinstance(t, str))
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content)
        return bool(result.is_error), text

    failed, text = _exchange(server, limits, calling, f"calling {name}")
    if len(text.encode()) > limits.output_bytes:
        raise McpError(f"{server.label}: the output of {name} is larger than LLM_MCP_MAX_OUTPUT_BYTES")
    if failed:
        raise McpError(text or f"{name} failed")
    return text


def _exchange(server: McpServer, limits: Limits, work: Callable[[Client], Awaitable[T]], doing: str) -> T:
    # The SDK (about 0.4 s to import) loads in the first request that uses an MCP tool, not in
    # every worker's start.
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> T:
        async with AsyncExitStack() as stack:
            if server.command:  # a process of its own for each exchange, over its stdin and stdout
                params = StdioServerParameters(command=server.command[0], args=list(server.command[1:]))
                return await work(await stack.enter_async_context(Client(params, cache=None)))
            http = await stack.enter_async_context(
                httpx2.AsyncClient(  # as the SDK's create_mcp_http_client, and pinned
                    headers={**server.headers, **_pinned_host(server)},
                    timeout=httpx2.Timeout(limits.seconds + 1),  # the deadline below ends it first
                    transport=_pinned_transport(server),
                )
            )
            transport = streamable_http_client(
                _pinned_url(server), http_client=http, max_sse_event_size=limits.output_bytes
            )
            client = await stack.enter_async_context(Client(transport, cache=None))
            return await work(client)

    try:
        return aio.run(session(), limits.seconds)
    except gevent.Timeout:
        raise McpError(f"{server.label}: no answer within {limits.seconds:g} s while {doing}") from None
    except McpError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the SDK or the network raise is the call's error
        raise McpError(f"{server.label}: {doing} failed: {_cause(exc)}") from None


def _cause(exc: BaseException) -> str:
    """The innermost error's message (the SDK wraps network errors in task-group exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]


def _pinned_url(server: McpServer) -> str:
    """The URL with its host replaced by the address that was checked, so that no second lookup can
    lead elsewhere (an operator's server, not pinned, as configured)."""
    parts, pin = urlsplit(server.url), server.pin
    if pin is None:
        return server.url
    address = f"[{pin.address}]" if ":" in pin.address else pin.address
    return urlunsplit(parts._replace(netloc=f"{address}:{pin.port}"))


def _pinned_host(server: McpServer) -> dict[str, str]:
    pin = server.pin
    if pin is None:
        return {}
    default = 443 if server.url.startswith("https:") else 80
    return {"Host": pin.host if pin.port == default else f"{pin.host}:{pin.port}"}


def _pinned_transport(server: McpServer) -> Any:
    """For HTTPS to a pinned address: TLS spoken to the URL's host name (SNI, and the certificate
    must name it), the connection made to the address that was checked."""
    import httpx2

    pin = server.pin
    if pin is None or not server.url.startswith("https:"):
        return None
    name = pin.host

    class NamedTls(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            request.extensions["sni_hostname"] = name
            return await super().handle_async_request(request)

    return NamedTls()
