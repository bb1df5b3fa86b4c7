"""/v1/responses through Flask's test client with the fake engine: the request reaches the engine as
planned, and the answer, whole or streamed, has the Responses API's shape, errors too."""

from __future__ import annotations

from flask.testing import FlaskClient

from app.engine.types import Chunk
from tests.support import sse
from tests.unit.conftest import MODEL_ID, FakeEngine


def test_a_whole_response_from_the_engine_s_chunks(client: FlaskClient, engine: FakeEngine) -> None:
    body = {"input": "hi", "instructions": "Be brief.", "max_output_tokens": 9, "temperature": 0}
    answer = client.post("/v1/responses", json=body).get_json()
    assert answer["object"] == "response" and answer["model"] == MODEL_ID and answer["status"] == "completed"
    assert answer["output"][0]["content"][0]["text"] == "Hello there"
    (request,) = engine.plans
    assert request.max_tokens == 9 and request.sampling.temperature == 0


def test_a_stream_is_typed_events_ending_in_completed(client: FlaskClient) -> None:
    answer = client.post("/v1/responses", json={"input": "hi", "stream": True})
    assert answer.mimetype == "text/event-stream"
    events = sse.named(answer.get_data())
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    assert "".join(d["delta"] for n, d in events if n == "response.output_text.delta") == "Hello there"


def test_an_error_after_the_200_is_response_failed(client: FlaskClient, engine: FakeEngine) -> None:
    engine.chunks = [Chunk("Hi"), Chunk(finish_reason="error", error="Traceback: secret /path")]
    data = client.post("/v1/responses", json={"input": "hi", "stream": True}).get_data()
    name, failed = sse.named(data)[-1]
    assert name == "response.failed" and failed["response"]["error"]["code"] == "server_error"
    assert b"secret" not in data


def test_a_bad_request_is_openai_s_error_naming_the_field(client: FlaskClient) -> None:
    answer = client.post("/v1/responses", json={"input": [{"type": "image", "url": "x"}]})
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"].startswith("input")


def test_the_input_token_count(client: FlaskClient) -> None:
    answer = client.post("/v1/responses/input_tokens", json={"input": "one two three"}).get_json()
    assert answer == {"object": "response.input_tokens", "input_tokens": 5}  # 3 words + the fake's 2


def test_openais_hosted_connectors_are_refused_by_name(client: FlaskClient) -> None:
    for field in ("connector_id", "tunnel_id"):
        tool = {"type": "mcp", "server_label": "mail", field: "connector_gmail"}
        answer = client.post("/v1/responses", json={"input": "hi", "tools": [tool]})
        error = answer.get_json()["error"]
        assert answer.status_code == 400 and error["param"] == f"tools[0].{field}", error
        assert "hosted connectors" in error["message"]
