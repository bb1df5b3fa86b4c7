"""The test MCP server (harness/mcp_server.py) started over streamable HTTP on a free loopback port."""

from __future__ import annotations

import sys
import time

import httpx

from harness.servers import ROOT, Service, free_port

# The same tools over stdio, as LLM_MCP_SERVERS names a command.
STDIO_COMMAND = [sys.executable, "-m", "harness.mcp_server", "stdio"]


def started() -> Service:
    """The server, once its MCP endpoint answers at all (a GET without a session is a 4xx: it is up)."""
    port = free_port()
    service = Service([sys.executable, "-m", "harness.mcp_server", str(port)], port, cwd=ROOT)
    for _ in range(300):
        try:
            httpx.get(service.url + "/mcp", timeout=1)
            return service
        except httpx.HTTPError:
            time.sleep(0.1)  # polling a process that is starting: there is no event to wait on
    service.stop(wait=False)
    raise RuntimeError(f"the MCP server did not start:\n{service.output()}")
