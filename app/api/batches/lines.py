"""A batch's input file read into lines: each a request to run, or, if malformed, its error line already.

As OpenAI's batch does, nothing in a line fails the whole batch: bad JSON, a missing or
repeated custom_id, another method or URL, or a body that is not an object each answer
with an error line, and the other lines run. A body our API would reject is found when
the line runs, and answered with that API's own error (see runner.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses")
MAX_LINES = 50_000  # OpenAI's limit of requests per batch


class TooManyLinesError(Exception):
    """The file holds more requests than a batch takes."""


def read_lines(
    pieces: Iterable[bytes], endpoint: str, route: Callable[[Any, str], str]
) -> Iterator[dict[str, Any]]:
    """Each non-blank line of the file as a row for the store (line_no, custom_id, model, body, result).

    `route(model, endpoint)` names the model whose workers may run the line ("": any worker).
    """
    seen: set[str] = set()
    for line_no, raw in enumerate(_split(pieces), start=1):
        if not raw.strip():
            continue
        if line_no > MAX_LINES:
            raise TooManyLinesError(
                f"The file has more than {MAX_LINES} requests; a batch takes at most that."
            )
        yield _row(line_no, raw, endpoint, seen, route)


def _row(
    line_no: int, raw: bytes, endpoint: str, seen: set[str], route: Callable[[Any, str], str]
) -> dict[str, Any]:
    try:
        request = json.loads(raw)
    except (ValueError, RecursionError):
        return _refused(line_no, None, "invalid_json_line", f"Line {line_no} is not valid JSON.")
    if not isinstance(request, dict):
        return _refused(line_no, None, "invalid_request", f"Line {line_no} is not a JSON object.")
    custom_id = request.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > 400:
        message = f"Line {line_no} needs a `custom_id`: a string of 1 to 400 characters."
        return _refused(line_no, None, "missing_custom_id", message)
    if custom_id in seen:
        message = f"Line {line_no} repeats the custom_id '{custom_id}'; each must be unique in the file."
        return _refused(line_no, custom_id, "duplicate_custom_id", message)
    seen.add(custom_id)
    if request.get("method") != "POST":
        return _refused(line_no, custom_id, "invalid_method", f'Line {line_no}: `method` must be "POST".')
    if request.get("url") != endpoint:
        message = f"Line {line_no}: `url` must be the batch's endpoint, {endpoint}."
        return _refused(line_no, custom_id, "invalid_url", message)
    body = request.get("body")
    if not isinstance(body, dict):
        return _refused(line_no, custom_id, "invalid_body", f"Line {line_no}: `body` must be a JSON object.")
    if body.get("stream") or body.get("background"):
        message = f"Line {line_no}: a batch answers whole responses; `stream` and `background` must be false."
        return _refused(line_no, custom_id, "invalid_body", message)
    return {"line_no": line_no, "custom_id": custom_id, "body": body, "result": None,
            "model": route(body.get("model"), endpoint)}  # fmt: skip


def _refused(line_no: int, custom_id: str | None, code: str, message: str) -> dict[str, Any]:
    return {"line_no": line_no, "custom_id": custom_id, "model": "", "body": None,
            "result": error_line(custom_id, code, message, line_no)}  # fmt: skip


def error_line(custom_id: str | None, code: str, message: str, line_no: int | None = None) -> dict[str, Any]:
    """A line that never reached an API (OpenAI's error file: `response` null, `error` set)."""
    return {"id": new_request_id(), "custom_id": custom_id, "response": None,
            "error": {"code": code, "message": message, "line": line_no}}  # fmt: skip


def answered_line(custom_id: str | None, status: int, request_id: str, body: Any) -> dict[str, Any]:
    """A line an API answered, successfully or with its own error (OpenAI's output line format)."""
    return {"id": new_request_id(), "custom_id": custom_id, "error": None,
            "response": {"status_code": status, "request_id": request_id, "body": body}}  # fmt: skip


def new_request_id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"


def _split(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The file's lines across its chunks (a chunk may end inside a line)."""
    rest = b""
    for piece in pieces:
        *whole, rest = (rest + piece).split(b"\n")
        yield from whole
    if rest:
        yield rest
