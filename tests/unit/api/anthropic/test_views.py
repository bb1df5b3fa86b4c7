"""/v1/messages through Flask's test client with the fake engine: Anthropic's shapes, errors included."""

from __future__ import annotations

from flask.testing import FlaskClient

from app.engine.types import Chunk
from tests.support import sse
from tests.unit.conftest import MODEL_ID, FakeEngine

HELLO = {"model": MODEL_ID, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def test_a_whole_message_from_the_engine_s_chunks(client: FlaskClient, engine: FakeEngine) -> None:
    message = client.post("/v1/messages", json={**HELLO, "stop_sequences": ["\n\n"]}).get_json()
    assert message["type"] == "message" and message["content"] == [{"type": "text", "text": "Hello there"}]
    assert message["stop_reason"] == "end_turn" and message["usage"]["output_tokens"] == 2
    (request,) = engine.plans
    assert request.max_tokens == 16 and request.stop == ["\n\n"]


def test_a_stream_from_message_start_to_message_stop(client: FlaskClient) -> None:
    events = sse.named(client.post("/v1/messages", json={**HELLO, "stream": True}).get_data())
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == "Hello there"


def test_an_error_after_the_200_is_an_error_event(client: FlaskClient, engine: FakeEngine) -> None:
    engine.chunks = [Chunk(finish_reason="error", error="Traceback: secret /path")]
    data = client.post("/v1/messages", json={**HELLO, "stream": True}).get_data()
    name, error = sse.named(data)[-1]
    assert (name, error["error"]["type"]) == ("error", "api_error") and b"secret" not in data


def test_errors_take_anthropic_s_shape_and_its_overload_status(
    client: FlaskClient, engine: FakeEngine
) -> None:
    answer = client.post("/v1/messages", json={"model": MODEL_ID, "messages": []})
    assert answer.status_code == 400
    assert (
        answer.get_json()["type"] == "error" and answer.get_json()["error"]["type"] == "invalid_request_error"
    )
    engine.ready = False  # the model not loaded yet: 503 elsewhere, Anthropic's 529 here
    overloaded = client.post("/v1/messages", json=HELLO)
    assert overloaded.status_code == 529 and overloaded.headers["Retry-After"] == "1"
    assert overloaded.get_json()["error"]["type"] == "overloaded_error"


def test_the_token_count(client: FlaskClient) -> None:
    count = client.post("/v1/messages/count_tokens", json={k: HELLO[k] for k in ("model", "messages")})
    assert count.get_json() == {"input_tokens": 3}  # one word + the fake's 2
