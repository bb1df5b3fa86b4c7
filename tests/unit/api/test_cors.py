"""CORS: off by default, an allow-list of origins when configured."""

from __future__ import annotations

from flask.testing import FlaskClient

from app import create_app
from tests.unit.conftest import FakeEngine, make_config

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def test_cors_is_off_by_default(client: FlaskClient) -> None:
    response = client.options(
        "/v1/chat/completions",
        headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"},
    )
    assert "Access-Control-Allow-Origin" not in response.headers


def test_cors_allow_list(engine: FakeEngine) -> None:
    client = create_app(make_config(LLM_CORS_ORIGINS="https://app.example.com"), engine=engine).test_client()
    preflight = client.options(
        "/v1/chat/completions",
        headers={
            "Origin": "https://app.example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert "authorization" in preflight.headers["Access-Control-Allow-Headers"].lower()
    other = client.post("/v1/chat/completions", json=CHAT, headers={"Origin": "https://evil.example.com"})
    assert "Access-Control-Allow-Origin" not in other.headers
