"""The one error tree: each error's status, type and code, and how any failure becomes one."""

from __future__ import annotations

import logging

import pytest
from marshmallow import ValidationError
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, RequestEntityTooLarge

from app.api.anthropic import errors as anthropic
from app.api.http import errors
from app.engine import errors as engine


@pytest.mark.parametrize(
    ("error", "status", "kind", "code"),
    [
        (errors.InvalidRequestError("x"), 400, "invalid_request_error", None),
        (errors.ContextLengthError("x"), 400, "invalid_request_error", "context_length_exceeded"),
        (errors.ModelNotFoundError("x"), 404, "invalid_request_error", "model_not_found"),
        (errors.NotAcceptableError("x"), 406, "invalid_request_error", "not_acceptable"),
        (errors.AuthenticationError("x"), 401, "invalid_request_error", "invalid_api_key"),
        (errors.RateLimitError("x", code="queue_full"), 429, "rate_limit_error", "queue_full"),
        (errors.KeyLimitError("x", {"Retry-After": "3"}), 429, "rate_limit_error", "rate_limit_exceeded"),
        (errors.ServiceUnavailableError("x"), 503, "service_unavailable", None),
        (errors.ServerError("x"), 500, "server_error", None),
    ],
)
def test_each_error_has_its_status_and_openai_shape(
    error: errors.APIError, status: int, kind: str, code: str | None
) -> None:
    assert error.status == status
    assert error.body() == {"error": {"message": "x", "type": kind, "param": None, "code": code}}


def test_waiting_answers_tell_when_to_retry() -> None:
    assert errors.RateLimitError("x").headers == {"Retry-After": "1"}
    assert errors.ServiceUnavailableError("x").headers == {"Retry-After": "1"}
    assert errors.KeyLimitError("x", {"Retry-After": "7"}).headers == {"Retry-After": "7"}


@pytest.mark.parametrize(
    ("failure", "status", "code", "param"),
    [
        (engine.QueueFullError("full"), 429, "queue_full", None),
        (engine.QueueTimeoutError("waited"), 503, "queue_timeout", None),
        (engine.KVCacheFullError("no room"), 503, "kv_cache_full", None),
        (engine.PromptRejectedError("template"), 400, None, "messages"),
        (engine.GrammarError("schema"), 400, None, None),
    ],
)
def test_engine_failures_get_their_http_face(
    failure: engine.EngineError, status: int, code: str | None, param: str | None
) -> None:
    error = errors.from_engine(failure)
    assert (error.status, error.code, error.param, error.message) == (status, code, param, failure.message)


def test_the_first_bad_field_is_named_with_its_path() -> None:
    error = errors.from_validation(ValidationError({"messages": {0: {"role": ["must be one of"]}}}))
    assert error.param == "messages[0].role" and error.message == "messages[0].role: must be one of"


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [(NotFound(), 404, "not_found"), (MethodNotAllowed(["GET"]), 405, "method_not_allowed"),
     (RequestEntityTooLarge(), 413, "request_too_large")],
)  # fmt: skip
def test_werkzeug_errors_take_the_same_shape(exc: HTTPException, status: int, code: str) -> None:
    error, headers = errors.to_api_error(exc)
    assert (error.status, error.code, error.type) == (status, code, "invalid_request_error")
    assert headers == ({"Allow": "GET"} if status == 405 else {})


def test_an_unexpected_failure_is_a_500_that_tells_no_internals(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        try:  # the handler runs while Flask handles the exception
            raise KeyError("/secret/path")
        except KeyError as exc:
            error, _ = errors.to_api_error(exc)
    assert error.status == 500 and "secret" not in error.message
    assert "/secret/path" in caplog.text  # the log has it all


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (errors.InvalidRequestError("x"), 400, "invalid_request_error"),
        (errors.AuthenticationError("x"), 401, "authentication_error"),
        (errors.ModelNotFoundError("x"), 404, "not_found_error"),
        (errors.NotAcceptableError("x"), 406, "invalid_request_error"),
        (errors.RateLimitError("x"), 429, "rate_limit_error"),
        (errors.ServerError("x"), 500, "api_error"),
        (errors.ServiceUnavailableError("x"), 529, "overloaded_error"),  # Anthropic's overload status
    ],
)
def test_anthropic_routes_give_the_same_errors_in_anthropic_shape(
    error: errors.APIError, status: int, kind: str
) -> None:
    assert anthropic.status_of(error) == status
    assert anthropic.body(error) == {"type": "error", "error": {"type": kind, "message": "x"}}
