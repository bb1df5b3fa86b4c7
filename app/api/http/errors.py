"""One error class tree, and the one place that turns any failure into OpenAI's error shape.

The engine raises errors of its own with no HTTP status (app/engine/errors.py); `from_engine`
is the one place that gives them theirs, so no class here shares a name with one there.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify
from marshmallow import ValidationError
from werkzeug.exceptions import HTTPException

from app.engine import errors as engine_errors

log = logging.getLogger(__name__)


class APIError(Exception):
    """An error a client sees: HTTP status plus OpenAI's type, code and param."""

    status = 500
    type = "server_error"
    code: str | None = None
    headers: dict[str, str] = {}

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        """OpenAI's error object."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequestError(APIError):
    """The request is malformed or asks for something the server cannot do."""

    status = 400
    type = "invalid_request_error"


class ContextLengthError(InvalidRequestError):
    """The prompt plus the tokens asked for do not fit the model's context."""

    code = "context_length_exceeded"


class NotFoundError(InvalidRequestError):
    """No such route or model."""

    status = 404


class PayloadTooLargeError(InvalidRequestError):
    """An upload larger than the server takes (LLM_MAX_FILE_BYTES)."""

    status = 413
    code = "file_too_large"


class ModelBusyError(InvalidRequestError):
    """An on-demand model cannot be unloaded (or its worker swapped) while it serves requests."""

    status = 409
    code = "model_busy"


class ModelNotFoundError(NotFoundError):
    """The request names a model this server does not serve."""

    code = "model_not_found"


class NotAcceptableError(InvalidRequestError):
    """The Accept header admits neither JSON nor an event stream."""

    status = 406
    code = "not_acceptable"


class NotSupportedError(APIError):
    """The model cannot do what the route is for (llama-server's 501: /infill without FIM tokens)."""

    status = 501
    type = "not_supported_error"


class PermissionDeniedError(APIError):
    """The operator has not allowed what the request asks (e.g. a file outside LLM_LORA_DIRS)."""

    status = 403
    type = "permission_error"


class ServiceUnavailableError(APIError):
    """The worker cannot serve right now: its model is loading, the wait was too long, the KV cache full."""

    status = 503
    type = "service_unavailable"
    headers = {"Retry-After": "1"}


class RateLimitError(APIError):
    """Too many requests: this worker's queue is full (`queue_full`), or a key is over its limits."""

    status = 429
    type = "rate_limit_error"
    # The openai SDKs retry 429 and 5xx by themselves, honouring Retry-After.
    headers = {"Retry-After": "1"}


class KeyLimitError(RateLimitError):
    """The request's key is over one of its limits (generations at once, requests or tokens per minute)."""

    code = "rate_limit_exceeded"

    def __init__(self, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.headers = headers  # Retry-After and OpenAI's x-ratelimit-*


class AuthenticationError(APIError):
    """A missing or wrong API key."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"
    headers = {"WWW-Authenticate": "Bearer"}


class ServerError(APIError):
    """Something unexpected failed; the details are in the log, not the response."""


def from_engine(error: engine_errors.EngineError) -> APIError:
    """The HTTP face of an engine failure: a full queue is a 429, a long wait a 503, and so on."""
    if isinstance(error, engine_errors.QueueFullError):
        return RateLimitError(error.message, code="queue_full")
    if isinstance(error, engine_errors.QueueTimeoutError):
        return ServiceUnavailableError(error.message, code="queue_timeout")
    if isinstance(error, engine_errors.KVCacheFullError):
        return ServiceUnavailableError(error.message, code="kv_cache_full")
    if isinstance(error, engine_errors.PromptRejectedError):
        return InvalidRequestError(error.message, param="messages")
    return InvalidRequestError(error.message)


def first_param(messages: Any, prefix: str = "") -> tuple[str, str]:
    """The first failing field of marshmallow's nested messages, as `a.b[0].c`, and its text."""
    if isinstance(messages, dict):
        key, value = next(iter(messages.items()))
        if key == "_schema":
            name = prefix or None
        elif isinstance(key, int):
            name = f"{prefix}[{key}]"
        else:
            name = f"{prefix}.{key}" if prefix else str(key)
        return first_param(value, name or "")
    if isinstance(messages, list) and messages:
        return first_param(messages[0], prefix)
    return prefix, str(messages)


def from_validation(error: ValidationError) -> InvalidRequestError:
    """Map marshmallow's ValidationError onto one 400 naming the first bad field."""
    param, text = first_param(error.messages)
    message = f"{param}: {text}" if param else text
    return InvalidRequestError(message, param=param or None)


def from_http(error: HTTPException) -> APIError:
    """Give werkzeug's routing and protocol errors the OpenAI shape."""
    api_error = APIError(error.description or error.name)
    api_error.status = error.code or 500
    api_error.type = "invalid_request_error" if api_error.status < 500 else "server_error"
    api_error.code = {
        404: "not_found",
        405: "method_not_allowed",
        413: "request_too_large",
    }.get(api_error.status)
    return api_error


def error_response(error: APIError, headers: dict[str, str] | None = None) -> Response:
    """Serialise an APIError with its status."""
    response = jsonify(error.body())
    response.status_code = error.status
    response.headers.update(headers or {})
    return response


def to_api_error(exc: Exception) -> tuple[APIError, dict[str, str]]:
    """Any failure as an APIError, with the headers its response needs (any protocol's handler uses it)."""
    if isinstance(exc, engine_errors.EngineError):
        exc = from_engine(exc)
    if isinstance(exc, APIError):
        return exc, exc.headers
    if isinstance(exc, ValidationError):
        return from_validation(exc), {}
    if isinstance(exc, HTTPException):
        allowed = getattr(exc, "valid_methods", None)
        return from_http(exc), ({"Allow": ", ".join(allowed)} if allowed else {})
    # The traceback goes to the log; the client gets no internals.
    log.exception("unhandled error")
    return ServerError("The server had an error while processing your request."), {}


def handle_exception(exc: Exception) -> Response:
    """The OpenAI routes' one error handler: every failure leaves as OpenAI's error JSON."""
    return error_response(*to_api_error(exc))


def init_app(app: Flask) -> None:
    """Route every exception through handle_exception."""
    app.register_error_handler(Exception, handle_exception)
