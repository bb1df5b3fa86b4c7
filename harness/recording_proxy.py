"""A loopback proxy that records what a client (a coding agent) sends and what each request got.

The agents' tests and the agent benchmark point an agent at it, in front of the server:
every request passes through unchanged (streams are relayed as they come, chunk by chunk)
and is kept, with its headers and the answer's status, headers and body, so that a test can
check what the agent sent and got, and replay the agent's requests turn by turn. A `script`
may answer a request itself (a tool call the small test model would never make), so that
the agent's next request, which carries the tool's result, is a real one.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


@dataclass
class Exchange:
    """One request as the client sent it, and the answer's status and headers."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response: bytes = b""  # the answer's body (its first MAX_KEPT bytes)
    scripted: bool = False  # answered by the proxy's script, not the server

    def json(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


MAX_KEPT = 4 << 20
# A scripted answer: its status, content type and body; None lets the request through.
Script = Callable[[Exchange], tuple[int, str, bytes] | None]


class RecordingProxy:
    """Listens on a free loopback port and relays to `upstream` (a port on 127.0.0.1; None: the script
    answers every request)."""

    def __init__(self, upstream: int | None, script: Script | None = None) -> None:
        self.exchanges: list[Exchange] = []
        self.script = script
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                proxy._relay(self, upstream)

            do_POST = do_DELETE = do_HEAD = do_GET  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - its signature
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> RecordingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def posts(self, path_prefix: str = "") -> list[Exchange]:
        """The POSTs recorded so far (whose path starts with `path_prefix`), in order."""
        return [e for e in self.exchanges if e.method == "POST" and e.path.startswith(path_prefix)]

    def _relay(self, handler: BaseHTTPRequestHandler, upstream: int | None) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        exchange = Exchange(handler.command, handler.path, dict(handler.headers.items()), body)
        self.exchanges.append(exchange)
        answer = self.script(exchange) if self.script is not None else None
        if answer is None and upstream is None:
            answer = 502, "text/plain", b"no upstream: the script answered nothing"
        if answer is not None:
            exchange.scripted, (exchange.status, kind, exchange.response) = True, answer
            handler.send_response(exchange.status)
            handler.send_header("Content-Type", kind)
            handler.send_header("Content-Length", str(len(exchange.response)))
            handler.end_headers()
            handler.wfile.write(exchange.response)
            return
        assert upstream is not None
        connection = http.client.HTTPConnection("127.0.0.1", upstream, timeout=900)
        try:
            connection.request(handler.command, handler.path, body=body, headers=headers)
            upstream_answer = connection.getresponse()
            exchange.status = upstream_answer.status
            exchange.response_headers = dict(upstream_answer.getheaders())
            handler.send_response(upstream_answer.status)
            for key, value in upstream_answer.getheaders():
                if key.lower() not in _HOP_BY_HOP:
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while piece := upstream_answer.read1(65536):
                if len(exchange.response) < MAX_KEPT:
                    exchange.response += piece[: MAX_KEPT - len(exchange.response)]
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except (ConnectionError, OSError):
            handler.close_connection = True
        finally:
            connection.close()
