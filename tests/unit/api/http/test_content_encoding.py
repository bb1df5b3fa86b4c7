"""Compressed bodies: gzip, deflate and zstd inflated, a bomb refused, errors in each family's shape."""

from __future__ import annotations

import gzip
import json
import zlib

import zstandard
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.unit.conftest import FakeEngine

CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()


def post(client: FlaskClient, body: bytes, encoding: str, path: str = "/v1/chat/completions") -> TestResponse:
    return client.post(
        path, data=body, headers={"Content-Encoding": encoding, "Content-Type": "application/json"}
    )


def test_each_encoding_reads_as_the_plain_body(client: FlaskClient, engine: FakeEngine) -> None:
    for encoding, body in [
        ("gzip", gzip.compress(CHAT)),
        ("deflate", zlib.compress(CHAT)),
        ("zstd", zstandard.ZstdCompressor().compress(CHAT)),
        ("identity", CHAT),
    ]:
        response = post(client, body, encoding)
        assert response.status_code == 200, (encoding, response.get_data(as_text=True))
    assert len(engine.plans) == 4


def test_a_body_that_inflates_past_the_limit_is_a_413_and_bad_data_a_400(client: FlaskClient) -> None:
    bomb = {"messages": [{"role": "user", "content": "a" * 100_000}]}  # the app's limit is 4096 bytes
    for encoding, body in [
        ("gzip", gzip.compress(json.dumps(bomb).encode())),
        ("zstd", zstandard.ZstdCompressor().compress(json.dumps(bomb).encode())),
    ]:
        assert len(body) < 4096
        response = post(client, body, encoding)
        assert response.status_code == 413, response.get_data(as_text=True)
        assert "LLM_MAX_BODY_BYTES" in response.get_json()["error"]["message"]
    broken = post(client, b"not gzip at all", "gzip")
    assert broken.status_code == 400 and "not valid gzip" in broken.get_json()["error"]["message"]
    truncated = post(client, gzip.compress(CHAT)[:-12], "gzip")
    assert truncated.status_code == 400
    unknown = post(client, CHAT, "br")
    assert unknown.status_code == 415 and "gzip" in unknown.get_json()["error"]["message"]


def test_anthropics_route_answers_in_its_own_shape(client: FlaskClient) -> None:
    response = post(client, b"\x28\xb5\x2f\xfd garbage", "zstd", "/v1/messages")
    assert response.status_code == 400
    assert response.get_json()["type"] == "error"
    assert response.get_json()["error"]["type"] == "invalid_request_error"
