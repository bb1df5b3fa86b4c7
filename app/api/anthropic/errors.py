"""Anthropic's error shape, for the Messages routes: `{"type": "error", "error": {"type", "message"}}`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.http.errors import APIError, to_api_error

# Anthropic's error type for each status; it reports overload as 529, not 503.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def status_of(error: APIError) -> int:
    return 529 if error.status == 503 else error.status


def body(error: APIError) -> dict[str, Any]:
    """The error object, as the anthropic SDKs read it."""
    status = status_of(error)
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def handle_exception(exc: Exception) -> Response:
    """The Messages routes' one error handler: the same errors as elsewhere, in Anthropic's shape."""
    error, headers = to_api_error(exc)
    response = jsonify(body(error))
    response.status_code = status_of(error)
    response.headers.update(headers)
    return response


def init_blueprint(bp: Blueprint) -> None:
    """Every error raised for this blueprint's routes (its views, auth, body size) in Anthropic's shape."""
    bp.register_error_handler(Exception, handle_exception)
