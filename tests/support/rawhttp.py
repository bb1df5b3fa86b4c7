"""A tiny HTTP/1.1 client on a raw socket, so tests see the exact bytes on the wire."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class RawResponse:
    """Status, headers (lower-case names, in order) and the de-chunked body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    chunks: list[bytes]

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name.lower()]
        return values[0] if values else None


def request_bytes(
    port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> bytes:
    payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {"Content-Type": "application/json"}).items()]
    if payload:
        lines.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def open_request(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> socket.socket:
    """Send a request and return the socket, to read the response at one's own pace."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(request_bytes(port, method, path, body, headers))
    return sock


def read_head(reader: Any) -> tuple[int, list[tuple[str, str]]]:
    status_line = reader.readline().decode("latin-1")
    status = int(status_line.split()[1])
    headers = []
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip().lower(), value.strip()))
    return status, headers


def read_chunk(reader: Any) -> bytes | None:
    """One chunk of a chunked body, or None at its end."""
    size = int(reader.readline().split(b";")[0], 16)
    data = reader.read(size)
    assert reader.read(2) == b"\r\n"
    return data if size else None


def fetch(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> RawResponse:
    """Send one request and read the whole response."""
    with open_request(port, method, path, body, headers, timeout) as sock:
        reader = sock.makefile("rb")
        status, head = read_head(reader)
        chunks: list[bytes] = []
        if ("transfer-encoding", "chunked") in head:
            while (chunk := read_chunk(reader)) is not None:
                chunks.append(chunk)
            body_bytes = b"".join(chunks)
        else:
            body_bytes = reader.read()
        return RawResponse(status, head, body_bytes, chunks)


class RawStream:
    """A streamed request on a raw socket, read at the test's pace: first its start, later the rest."""

    def __init__(self, port: int, body: dict, sock: socket.socket | None = None) -> None:
        self.sock = sock or open_request(port, "POST", "/v1/completions", body)
        self.reader = self.sock.makefile("rb")
        self.chunks: list[bytes] = []

    def started(self) -> RawStream:
        """Once the 200 and the first generated event have arrived: the stream is under way."""
        status, _ = read_head(self.reader)
        assert status == 200
        while not (self.chunks and self.chunks[-1].startswith(b"data: {")):
            chunk = read_chunk(self.reader)
            assert chunk is not None, self.chunks
            self.chunks.append(chunk)
        return self

    def rest(self) -> list[bytes]:
        """Every chunk until the end of the body (or of the connection); closes the socket."""
        try:
            while (chunk := read_chunk(self.reader)) is not None:
                self.chunks.append(chunk)
        except (OSError, ValueError):
            self.chunks.append(b"<connection lost>")
        self.reader.close()
        self.sock.close()
        return self.chunks


def finish_reason(chunks: list[bytes]) -> str | None:
    events = [json.loads(c[6:]) for c in chunks if c.startswith(b"data: {")]
    return events[-1]["choices"][0]["finish_reason"] if events else None
