"""Every error a client can cause, from the real gunicorn server: OpenAI's shape, right status."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from harness.servers import Server
from tests.support.rawhttp import fetch

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param", "code"),
    [
        ("POST", "/v1/chat/completions", b"{oops", 400, None, None),
        ("POST", "/v1/chat/completions", b"[]", 400, None, None),
        ("POST", "/v1/chat/completions", b'"text"', 400, None, None),
        (
            "POST",
            "/v1/chat/completions",
            {"messages": USER, "model": "gpt-4o"},
            404,
            "model",
            "model_not_found",
        ),
        ("POST", "/v1/chat/completions", {"messages": USER, "temperature": 9}, 400, "temperature", None),
        ("POST", "/v1/chat/completions", {"messages": USER, "n": 9}, 400, "n", None),
        ("POST", "/v1/chat/completions", {"messages": USER, "stop": ["a"] * 5}, 400, "stop", None),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user"}]}, 400, "messages[0].content", None),
        ("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 5000}, 400, "max_tokens", None),
        (
            "POST",
            "/v1/chat/completions",
            {"messages": USER, "max_completion_tokens": 2040, "stream": True},
            400,
            "max_completion_tokens",
            "context_length_exceeded",
        ),
        (
            "POST",
            "/v1/completions",
            {"prompt": "hello " * 2100, "stream": True},
            400,
            "prompt",
            "context_length_exceeded",
        ),
        ("POST", "/v1/completions", {"prompt": "a", "suffix": "b"}, 400, "suffix", None),
        ("POST", "/v1/completions", {"prompt": "a", "max_tokens": "ten"}, 400, "max_tokens", None),
        ("GET", "/v1/completions", None, 405, None, "method_not_allowed"),
        ("DELETE", "/v1/models", None, 405, None, "method_not_allowed"),
        ("GET", "/v2/anything", None, 404, None, "not_found"),
        ("GET", "/v1/models/gpt-4o", None, 404, "model", "model_not_found"),
    ],
)
def test_error(
    server: Server, method: str, path: str, body: Any, status: int, param: str | None, code: str | None
) -> None:
    response = fetch(server.port, method, path, body)
    assert response.status == status, response.body
    assert response.header("content-type") == "application/json"
    error = httpx.Response(status, content=response.body).json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert (error["param"], error["code"]) == (param, code)
    assert error["type"] == "invalid_request_error"


def test_body_over_the_limit_is_413(start_server: Any) -> None:
    server = start_server(LLM_MAX_BODY_BYTES="2000")
    response = fetch(server.port, "POST", "/v1/completions", {"prompt": "x" * 3000})
    assert response.status == 413
    assert httpx.Response(413, content=response.body).json()["error"]["code"] == "request_too_large"
    # The worker is unharmed: a normal request right after is served.
    assert fetch(server.port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 1}).status == 200


def test_curl_style_form_content_type_is_read_as_json(server: Server) -> None:
    response = fetch(
        server.port,
        "POST",
        "/v1/completions",
        {"prompt": "Hi", "max_tokens": 2},
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status == 200


@pytest.mark.parametrize(
    ("call", "param"),
    [
        ({"id": "call_1"}, "messages[1].tool_calls[0].function"),
        ({"id": "call_1", "function": {"arguments": "{}"}}, "messages[1].tool_calls[0].function.name"),
        (
            {"id": "call_1", "function": {"name": "f", "arguments": 5}},
            "messages[1].tool_calls[0].function.arguments",
        ),
        ({"function": {"name": "f", "arguments": "{}"}}, "messages[1].tool_calls[0].id"),
    ],
)
def test_an_earlier_call_written_back_incomplete_is_a_400_naming_it(
    server: Server, call: dict[str, Any], param: str
) -> None:
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "and?"},
    ]
    response = fetch(server.port, "POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 1})
    assert response.status == 400, response.body  # it was a 500: the conversation's template step broke
    assert httpx.Response(400, content=response.body).json()["error"]["param"] == param
