"""The Responses API through the openai SDK's own helpers, and its raw event stream, on the real server."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import httpx
import openai
import pydantic
import pytest

from harness.servers import Server
from tests.support import sse
from tests.support.busy import model_busy
from tests.support.provider_schemas import check_openai
from tests.support.rawhttp import fetch, open_request, read_chunk, read_head
from tests.support.waits import wait_for_log

MODEL = "SmolLM2-135M-Instruct.Q4_1"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_create_whole_and_its_schema(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL, input="Name a colour.", max_output_tokens=16, temperature=0
    )
    assert response.object == "response" and response.status in ("completed", "incomplete")
    assert response.output_text and response.output[0].type == "message"
    assert response.usage.input_tokens > 0 and response.usage.total_tokens == (
        response.usage.input_tokens + response.usage.output_tokens
    )
    check_openai(response.model_dump(mode="json", exclude_unset=True), "Response")


def test_stream_helper_and_final_response(client: openai.OpenAI) -> None:
    deltas = []
    # An answer that ends by itself: the helper wants response.completed (not response.incomplete).
    with client.responses.stream(model=MODEL, input="Hi", max_output_tokens=80, temperature=0) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()  # strict about order and ids
    assert "".join(deltas) == final.output_text and deltas


def test_raw_stream_order_numbers_and_ids(server: Server) -> None:
    body = {"model": MODEL, "input": "Hello!", "max_output_tokens": 12, "stream": True}
    raw = fetch(server.port, "POST", "/v1/responses", body)
    assert raw.status == 200 and raw.header("content-type") == "text/event-stream; charset=utf-8"
    assert b"[DONE]" not in raw.body
    events = sse.named(raw.body)
    names = [name for name, _ in events]
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert names[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert names[-4:-1] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert names[-1] in ("response.completed", "response.incomplete")
    created, final = events[0][1]["response"], events[-1][1]["response"]
    assert created["status"] == "in_progress" and created["output"] == [] and created["id"] == final["id"]
    item_id = events[2][1]["item"]["id"]
    assert {data["item_id"] for name, data in events if "delta" in name} == {item_id}
    assert final["output"][0]["id"] == item_id
    text = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
    assert final["output"][0]["content"][0]["text"] == text
    for _, data in events:
        check_openai(data, "ResponseStreamEvent")


def test_forced_function_call_streamed_then_answered(client: openai.OpenAI) -> None:
    stream = client.responses.create(
        model=MODEL,
        input="What is the weather in Oslo?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        stream=True,
    )
    events = list(stream)
    types = [event.type for event in events]
    assert "response.function_call_arguments.delta" in types and "response.output_text.delta" not in types
    final = events[-1].response
    (call,) = final.output
    assert call.type == "function_call" and call.name == "get_weather" and json.loads(call.arguments)["city"]
    added = next(e for e in events if e.type == "response.output_item.added")
    assert added.item.id == call.id and added.item.call_id == call.call_id
    # The second turn sends the call and its output back, and asks for words this time.
    answer = client.responses.create(
        model=MODEL,
        max_output_tokens=30,
        tools=[WEATHER],
        tool_choice="none",
        input=[
            {"role": "user", "content": "What is the weather in Oslo?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 degrees."},
        ],
    )
    assert answer.output_text


class Person(pydantic.BaseModel):
    name: str
    age: int


def test_parse_into_a_pydantic_model(client: openai.OpenAI) -> None:
    response = client.responses.parse(
        model=MODEL, input="Invent a person.", text_format=Person, max_output_tokens=60, temperature=0
    )
    assert isinstance(response.output_parsed, Person)


def test_input_tokens_and_clear_400s(server: Server, client: openai.OpenAI) -> None:
    counted = httpx.post(server.url + "/v1/responses/input_tokens", json={"input": "Hello there"}, timeout=30)
    assert counted.json()["object"] == "response.input_tokens" and counted.json()["input_tokens"] > 2
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="Hi", previous_response_id="resp_123")
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input=[{"type": "input_image", "image_url": "x"}])
    assert caught.value.body["param"] == "input"
    # Settings accepted (store keeps the response; the effort goes to the chat template).
    accepted = client.responses.create(
        model=MODEL,
        input="Hi",
        store=True,
        metadata={"k": "v"},
        reasoning={"effort": "low"},
        max_output_tokens=4,
    )
    assert accepted.metadata == {"k": "v"} and accepted.to_dict()["store"] is True


def test_unknown_stored_things_are_404s_that_name_them(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as no_conversation:
        client.responses.create(model=MODEL, input="Hi", conversation="conv_1")
    assert no_conversation.value.body["param"] == "conversation"
    for ask in (
        lambda: client.responses.retrieve("resp_123"),
        lambda: client.responses.delete("resp_123"),
        lambda: client.responses.input_items.list("resp_123"),
        lambda: client.responses.cancel("resp_123"),
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            ask()
        assert missing.value.body["param"] == "response_id"
        assert missing.value.body["message"] == "Response with id 'resp_123' not found."


def test_error_after_the_200_is_response_failed(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="1", LLM_QUEUE_TIMEOUT="1", LLM_SSE_KEEPALIVE="0.3")
    with model_busy(server.port):
        raw = fetch(server.port, "POST", "/v1/responses", {"input": "Hi", "stream": True})
    events = sse.named(raw.body)
    assert [name for name, _ in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and "waited" in failed["error"]["message"]
    assert b": keep-alive" in raw.body  # it waited with keep-alives before failing
    check_openai(events[-1][1], "ResponseStreamEvent")


def test_a_hang_up_frees_the_sequence(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="1")
    sock = open_request(server.port, "POST", "/v1/responses", {"input": "1, 2, 3,", "stream": True})
    reader = sock.makefile("rb")
    assert read_head(reader)[0] == 200
    while b"output_text.delta" not in (read_chunk(reader) or b"output_text.delta"):
        pass
    sock.shutdown(socket.SHUT_RDWR)
    reader.close()
    sock.close()
    wait_for_log(server, "cancelled by its client after")
    assert fetch(server.port, "POST", "/v1/responses", {"input": "Hi", "max_output_tokens": 2}).status == 200


def test_output_text_logprobs_whole_and_streamed_are_chat_completions(client: openai.OpenAI) -> None:
    # include: ["message.output_text.logprobs"] with top_logprobs, as OpenAI's; the same input as a
    # chat message scores the same tokens.
    asked: dict = {"model": MODEL, "input": "Name a colour.", "max_output_tokens": 8, "temperature": 0}
    scored = {"include": ["message.output_text.logprobs"], "top_logprobs": 2}
    whole = client.responses.create(**asked, **scored)
    (part,) = whole.output[0].content
    assert part.type == "output_text" and part.logprobs and whole.top_logprobs == 2
    assert "".join(entry.token for entry in part.logprobs) == part.text
    assert all(len(entry.top_logprobs) == 2 for entry in part.logprobs)
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Name a colour."}], max_tokens=8, temperature=0,
        logprobs=True, top_logprobs=2,
    )  # fmt: skip
    assert chat.choices[0].logprobs is not None and chat.choices[0].logprobs.content is not None
    expected = [(e.token, round(e.logprob, 4)) for e in chat.choices[0].logprobs.content]
    assert [(e.token, round(e.logprob, 4)) for e in part.logprobs] == expected
    deltas: list[tuple[str, float]] = []
    done = None
    for event in client.responses.create(**asked, **scored, stream=True):
        if event.type == "response.output_text.delta":
            deltas.extend((e.token, round(e.logprob, 4)) for e in event.logprobs)
        elif event.type == "response.output_text.done":
            done = [(e.token, round(e.logprob, 4)) for e in event.logprobs]
    assert deltas == done == expected
    plain = client.responses.create(**asked)  # not asked for: none
    assert plain.output[0].content[0].logprobs == []
