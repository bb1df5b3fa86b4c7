"""Run a request through this worker's own app, as if a client had sent it, and read the answer.

A batch's lines and the warm set's requests go this way. Going through the app rather than
around it, a request gets exactly what a client would:
the same validation, the same errors in its API's shape, the same stored Responses, the
same access log line and metrics. Only the door differs (see app/serving/internal.py).
"""

from __future__ import annotations

import json
from typing import Any

from flask import Flask
from werkzeug.test import EnvironBuilder

from app.serving import internal
from app.serving.internal import InternalCall


def dispatch(app: Flask, path: str, body: dict[str, Any], call: InternalCall) -> tuple[int, str, Any]:
    """POST `body` to `path` in-process: (status, request id, the answer's JSON or None if it had none)."""
    builder = EnvironBuilder(path=path, method="POST", json=body, headers=[("Accept", "application/json")])
    try:
        environ = builder.get_environ()
    finally:
        builder.close()
    environ[internal.ENVIRON_KEY] = call
    with app.request_context(environ):
        response = app.full_dispatch_request()
    try:
        data = response.get_data()
    finally:
        response.close()  # its close callbacks: the access log line, the key's count
    try:
        answer = json.loads(data) if data else None
    except ValueError:
        answer = None
    return response.status_code, response.headers.get("X-Request-ID", ""), answer
