"""Views and the error shape through Flask's test client, with a fake engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.engine.types import Chunk
from tests.unit.conftest import MODEL_ID, FakeEngine

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "Traceback" not in response.get_data(as_text=True)
    return error


def test_chat_completion_object(client: FlaskClient, engine: FakeEngine) -> None:
    body = client.post("/v1/chat/completions", json={**CHAT, "model": MODEL_ID, "seed": -1}).get_json()
    assert body["object"] == "chat.completion" and body["model"] == MODEL_ID
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello there", "refusal": None}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert engine.plans[0].sampling.seed == -1


def test_sampling_defaults_and_overrides_reach_the_engine(client: FlaskClient, engine: FakeEngine) -> None:
    client.post("/v1/completions", json={"prompt": "a b", "temperature": None, "top_k": 5, "stop": "x"})
    request = engine.plans[0]
    assert request.sampling.temperature == 0.8 and request.sampling.top_k == 5
    assert request.stop == ["x"] and request.prompt_tokens == [1, 1]
    assert request.max_tokens == 64 - 2  # the rest of the context


def test_exact_stream_bytes(client: FlaskClient) -> None:
    response = client.post("/v1/completions", json={"prompt": "a", "stream": True})
    assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Accel-Buffering"] == "no"
    assert "Content-Length" not in response.headers
    events = response.get_data().split(b"\n\n")
    assert events[-2:] == [b"data: [DONE]", b""]
    payloads = [json.loads(e.removeprefix(b"data: ")) for e in events[:-2]]
    assert [p["choices"][0]["text"] for p in payloads] == ["Hello", " there", ""]
    assert [p["choices"][0]["finish_reason"] for p in payloads] == [None, None, "stop"]
    assert len({(p["id"], p["created"], p["model"], p["object"]) for p in payloads}) == 1


def test_error_after_the_200_is_one_data_event(client: FlaskClient, engine: FakeEngine) -> None:
    engine.chunks = [Chunk("Hi"), Chunk(finish_reason="error", error="Traceback: secret /path")]
    data = client.post("/v1/chat/completions", json={**CHAT, "stream": True}).get_data(as_text=True)
    events = data.split("\n\n")
    last = json.loads(events[-2].removeprefix("data: "))
    assert set(last) == {"error"} and last["error"]["type"] == "server_error"
    assert "secret" not in data and "[DONE]" not in data


def test_generation_failure_without_stream_is_500(client: FlaskClient, engine: FakeEngine) -> None:
    engine.chunks = [Chunk(finish_reason="error", error="Traceback: secret")]
    error = error_of(client.post("/v1/chat/completions", json=CHAT), 500)
    assert "secret" not in error["message"]


def test_unexpected_exception_is_500_without_traceback(
    client: FlaskClient, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(request: Any) -> None:
        raise RuntimeError("internal detail")

    monkeypatch.setattr(engine, "submit", explode)
    error = error_of(client.post("/v1/chat/completions", json=CHAT), 500)
    assert error["type"] == "server_error" and "internal detail" not in error["message"]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "param", "code"),
    [
        ("post", "/v1/chat/completions", {"data": "{not json"}, 400, None, None),
        ("post", "/v1/chat/completions", {"data": ""}, 400, None, None),
        ("post", "/v1/chat/completions", {"json": [1, 2]}, 400, None, None),
        ("post", "/v1/chat/completions", {"data": "[" * 3000}, 400, None, None),
        (
            "post",
            "/v1/chat/completions",
            {"json": {**CHAT, "model": "gpt-4"}},
            404,
            "model",
            "model_not_found",
        ),
        ("post", "/v1/chat/completions", {"json": {**CHAT, "top_p": 0}}, 400, "top_p", None),
        ("post", "/v1/chat/completions", {"json": {**CHAT, "n": 9}}, 400, "n", None),
        (
            "post",
            "/v1/chat/completions",
            {"json": {**CHAT, "max_tokens": 63}},
            400,
            "max_tokens",
            "context_length_exceeded",
        ),
        ("post", "/v1/chat/completions", {"json": {**CHAT, "max_tokens": 65}}, 400, "max_tokens", None),
        (
            "post",
            "/v1/completions",
            {"json": {"prompt": "w " * 64}},
            400,
            "prompt",
            "context_length_exceeded",
        ),
        ("post", "/v1/completions", {"json": {"prompt": "a", "suffix": "b"}}, 400, "suffix", None),
        ("post", "/v1/completions", {"data": "x" * 5000}, 413, None, "request_too_large"),
        ("get", "/v1/chat/completions", {}, 405, None, "method_not_allowed"),
        ("get", "/v1/nothing", {}, 404, None, "not_found"),
        ("get", "/v1/models/other", {}, 404, "model", "model_not_found"),
    ],
)
def test_errors_have_openai_shape(
    client: FlaskClient,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    param: str | None,
    code: str | None,
) -> None:
    error = error_of(getattr(client, method)(path, **kwargs), status)
    assert error["param"] == param and error["code"] == code
    assert error["type"] == "invalid_request_error"


def test_405_names_the_allowed_methods(client: FlaskClient) -> None:
    allowed = client.get("/v1/completions").headers["Allow"]
    assert sorted(allowed.split(", ")) == ["OPTIONS", "POST"]


def test_models_and_health(client: FlaskClient, engine: FakeEngine) -> None:
    assert client.get("/v1/models").get_json()["data"][0]["id"] == MODEL_ID
    assert client.get(f"/v1/models/{MODEL_ID}").get_json()["object"] == "model"
    assert client.get("/health").status_code == 200
    assert client.get("/health/ready").status_code == 200
    engine.ready = False
    assert client.get("/health").status_code == 200
    error_of(client.get("/health/ready"), 503)
    error_of(client.post("/v1/chat/completions", json=CHAT), 503)


def test_default_and_ceiling_of_max_tokens(engine: FakeEngine) -> None:
    from app import create_app
    from tests.unit.conftest import make_config

    client = create_app(
        make_config(LLM_DEFAULT_MAX_TOKENS="10", LLM_MAX_TOKENS_LIMIT="20"), engine=engine
    ).test_client()
    client.post("/v1/completions", json={"prompt": "a"})
    assert engine.plans[-1].max_tokens == 10
    client.post("/v1/completions", json={"prompt": "a", "max_tokens": 20})
    assert engine.plans[-1].max_tokens == 20
    error = error_of(client.post("/v1/completions", json={"prompt": "a", "max_tokens": 21}), 400)
    assert error["param"] == "max_tokens" and "limit of 20" in error["message"]
