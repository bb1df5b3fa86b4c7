"""gunicorn's own answers to requests it cannot parse, as JSON errors in OpenAI's shape, not HTML.

A request line past limit_request_line (414), more headers than limit_request_fields or one
past limit_request_field_size (431), a malformed request (400): gunicorn answers these before
any route is known, with an HTML page. API clients read JSON error bodies; so the page is
written here as OpenAI's error object, with gunicorn's status, and Connection: close as before.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from gunicorn import util  # type: ignore[import-untyped]  # gunicorn has no type hints

LINGER_SECONDS, LINGER_BYTES = 2.0, 4 << 20
_CODES = {400: "bad_request", 403: "forbidden", 414: "request_line_too_long", 417: "expectation_failed",
          431: "request_headers_too_large", 501: "not_implemented"}  # fmt: skip


def body(status: int, reason: str, message: str) -> bytes:
    """The JSON error for one of gunicorn's refusals (its message cut short: it may quote the request)."""
    said = f"{reason}: {message[:200]}" if message else reason
    error = {"message": said, "type": "invalid_request_error" if status < 500 else "server_error",
             "param": None, "code": _CODES.get(status)}  # fmt: skip
    return json.dumps({"error": error}).encode()


def write_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    payload = body(status_int, reason, mesg)
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + payload)
    _linger(sock)


def _linger(sock: Any) -> None:
    """Read and drop what the client is still sending (a bounded amount, briefly) before the close:
    closed with unread bytes, the socket would send a reset, and the client lose the answer
    (nginx's lingering_close)."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(LINGER_SECONDS)
        deadline = time.monotonic() + LINGER_SECONDS
        read = 0
        while read < LINGER_BYTES and time.monotonic() < deadline and (chunk := sock.recv(65536)):
            read += len(chunk)
    except OSError:
        pass  # the client is gone or slow: it has had its answer's chance


def install() -> None:
    """Make gunicorn write its refusals so (its workers call util.write_error)."""
    util.write_error = write_error
