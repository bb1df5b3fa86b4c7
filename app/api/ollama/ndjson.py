"""Newline-delimited JSON, as Ollama streams: one object per line, no blank lines, no comments."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Response

MEDIA_TYPE = "application/x-ndjson"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # nginx: pass each line on at once


def line(payload: dict[str, Any]) -> bytes:
    """One object and its newline (clients split on newlines and parse every line: none may be empty)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def stream_response(lines: Iterable[bytes]) -> Response:
    """A streaming NDJSON response whose headers leave before the first line is produced."""
    response = Response(_headers_first(lines), mimetype=MEDIA_TYPE)
    response.headers.update(HEADERS)
    return response


def _headers_first(lines: Iterable[bytes]) -> Iterator[bytes]:
    yield b""
    yield from lines
