"""An MCP server for the tests, written with the `mcp` SDK (MCPServer) and served over streamable HTTP:
a calculator, a tool that fails, one that hangs, one with a large output, and one that says which
Authorization header it was sent (so a test sees headers reach the server, and nowhere else).

    python -m harness.mcp_server PORT
    python -m harness.mcp_server stdio     # the same tools over stdin and stdout

`started()` runs it over HTTP on a free loopback port, for the tests and the docs' screenshots.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from harness.servers import ROOT, Service, free_port

server = MCPServer("test-tools")
# The same tools over stdio, as LLM_MCP_SERVERS names a command.
STDIO_COMMAND = [sys.executable, "-m", "harness.mcp_server", "stdio"]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))  # it changes nothing
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(code: int) -> str:
    """A tool that always fails."""
    raise ValueError(f"this tool always fails ({code})")


@server.tool()
def hang(seconds: int) -> str:
    """A tool that answers after a long time."""
    print("hang: called", flush=True)  # a test waits for this line
    time.sleep(600)
    return "never"


@server.tool()
def big(size: int) -> str:
    """A tool whose output is ten megabytes."""
    return "x" * 10_000_000


def started() -> Service:
    """This server over HTTP, once its MCP endpoint answers at all (a GET without a session is a 4xx)."""
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


def main() -> None:
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app()

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The app, printing each request's Authorization header (the test reads the log)."""
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == b"authorization":
                    print(f"authorization: {value.decode()}", flush=True)
        await app(scope, receive, send)

    uvicorn.run(recording, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")


if __name__ == "__main__":
    main()
