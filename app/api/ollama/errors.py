"""Ollama's error shape, for the `/api/*` routes: `{"error": "<message>"}` with the status."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.http.errors import APIError, to_api_error


class ManagedByConfigurationError(APIError):
    """Ollama's model management (pull, push, create, copy, delete): this server's models come from
    its configuration."""

    status = 501
    type = "not_implemented"


def handle_exception(exc: Exception) -> Response:
    """The Ollama routes' one error handler: the same errors as elsewhere, in Ollama's shape."""
    error, headers = to_api_error(exc)
    response = jsonify({"error": error.message})
    response.status_code = error.status
    response.headers.update(headers)
    return response


def init_blueprint(bp: Blueprint) -> None:
    """Every error raised for this blueprint's routes (its views, auth, body size) in Ollama's shape."""
    bp.register_error_handler(Exception, handle_exception)
