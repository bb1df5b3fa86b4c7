"""Anthropic's Messages API through the anthropic SDK, and its raw event stream, on the real server."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator

import anthropic
import pytest
from anthropic.types import Message, RawMessageStreamEvent

from harness.servers import Server
from tests.support import sse
from tests.support.busy import model_busy
from tests.support.provider_schemas import check_anthropic
from tests.support.rawhttp import fetch

MODEL = "SmolLM2-135M-Instruct.Q4_1"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
HELLO = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def client(server: Server) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as opened:
        yield opened


def test_create_and_its_schema(client: anthropic.Anthropic) -> None:
    message = client.messages.create(
        model=MODEL, max_tokens=60, messages=HELLO, extra_body={"temperature": 0}
    )
    assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    check_anthropic(message.model_dump(mode="json", exclude_unset=True), Message)


def test_stream_text_and_final_message(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model=MODEL, max_tokens=60, messages=HELLO, extra_body={"temperature": 0}
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].text == text and final.stop_reason == "end_turn"


def test_stop_sequences_and_max_tokens(client: anthropic.Anthropic) -> None:
    counting = [{"role": "user", "content": "Count from 1 to 20, separated by commas."}]
    cut = client.messages.create(model=MODEL, max_tokens=5, messages=counting, extra_body={"temperature": 0})
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 5
    stopped = client.messages.create(
        model=MODEL, max_tokens=80, messages=counting, extra_body={"temperature": 0}, stop_sequences=["5"]
    )
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "5"
    assert "5" not in stopped.content[0].text


def test_a_tools_size_bound_past_the_servers_is_left_out_of_its_grammar(client: anthropic.Anthropic) -> None:
    # Claude Code's Write tool says `maxLength: 524288` of its content: "any", for a grammar a bound
    # no grammar could spell out (a response format's is refused with a 400, the tool's is left out).
    write = {
        "name": "write_file",
        "description": "Write a file",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 40},
                "content": {"type": "string", "maxLength": 524288},
            },
            "required": ["path", "content"],
        },
    }
    arguments = ""
    with client.messages.stream(
        model=MODEL, max_tokens=200, tools=[write], tool_choice={"type": "any"},
        messages=[{"role": "user", "content": "Write hello to a.txt"}], extra_body={"temperature": 0},
    ) as stream:  # fmt: skip
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                arguments += event.delta.partial_json
        message = stream.get_final_message()
    # At temperature 0 SmolLM2 writes the content until max_tokens: the large bound is not spelt
    # out, so nothing stops it but the answer's length (sampled, it may close the call sooner).
    assert message.content[0].type == "tool_use" and message.content[0].name == "write_file"
    assert message.stop_reason in ("max_tokens", "tool_use")
    path = re.match(r'\{\s*"path"\s*:\s*"([^"]*)"\s*,\s*"content"\s*:\s*"', arguments)
    assert path is not None and len(path[1]) <= 40, arguments  # the small bound holds
    assert len(arguments) > 60  # and the content runs on past any small bound


def test_tool_use_then_tool_result(client: anthropic.Anthropic) -> None:
    question = [{"role": "user", "content": "What is the weather in Oslo?"}]
    message = client.messages.create(
        model=MODEL,
        max_tokens=60,
        messages=question,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
    )
    (use,) = message.content
    assert use.type == "tool_use" and use.name == "get_weather" and isinstance(use.input.get("city"), str)
    assert message.stop_reason == "tool_use" and use.id.startswith("toolu_")
    with client.messages.stream(
        model=MODEL, max_tokens=60, messages=question, tools=[WEATHER], tool_choice={"type": "any"}
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.content[0].type == "tool_use" and streamed.stop_reason == "tool_use"
    answer = client.messages.create(
        model=MODEL,
        max_tokens=30,
        tools=[WEATHER],
        tool_choice={"type": "none"},
        messages=[
            *question,
            {"role": "assistant", "content": [use.model_dump()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21."}],
            },
        ],
    )
    assert answer.content and answer.content[0].type == "text"


def test_count_tokens(client: anthropic.Anthropic) -> None:
    short = client.messages.count_tokens(model=MODEL, messages=HELLO)
    longer = client.messages.count_tokens(
        model=MODEL, messages=HELLO, system="You are terse.", tools=[WEATHER]
    )
    assert 0 < short.input_tokens < longer.input_tokens


def test_raw_stream_and_its_schema(server: Server) -> None:
    body = {"model": MODEL, "max_tokens": 40, "messages": HELLO, "stream": True}
    raw = fetch(
        server.port, "POST", "/v1/messages", body, {"Content-Type": "application/json", "x-api-key": "k"}
    )
    assert raw.status == 200 and raw.header("content-type") == "text/event-stream; charset=utf-8"
    events = sse.named(raw.body)
    names = [name for name, _ in events if name != "ping"]
    assert names[0] == "message_start" and names[1] == "content_block_start"
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[2:-3]) == {"content_block_delta"}
    for name, data in events:
        assert data["type"] == name
        if name != "ping":
            check_anthropic(data, RawMessageStreamEvent)


def test_errors_in_anthropics_shape(server: Server, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=MODEL, max_tokens=0, messages=HELLO)
    assert (
        caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "invalid_request_error"
    )
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="claude-nope", max_tokens=5, messages=HELLO)
    assert missing.value.body["error"]["type"] == "not_found_error"
    raw = fetch(server.port, "POST", "/v1/messages", {"model": MODEL, "messages": HELLO})  # no max_tokens
    assert raw.status == 400 and json.loads(raw.body)["error"]["message"].startswith("max_tokens")


def test_keys_by_x_api_key_and_errors_after_the_200(
    start_server: Callable[..., Server], request: pytest.FixtureRequest
) -> None:
    server = start_server(
        LLM_PARALLEL="1", LLM_QUEUE_TIMEOUT="1", LLM_SSE_KEEPALIVE="0.3", LLM_API_KEYS="sk-a"
    )
    # Clients closed when done: a client left to the garbage collector warns of its open socket.
    with anthropic.Anthropic(base_url=server.url, api_key="sk-wrong", max_retries=0) as wrong:
        with pytest.raises(anthropic.AuthenticationError):
            wrong.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-a", max_retries=0)
    request.addfinalizer(client.close)
    assert client.messages.create(model=MODEL, max_tokens=3, messages=HELLO).content is not None
    headers = {"Content-Type": "application/json", "x-api-key": "sk-a"}
    with model_busy(server.port, headers=headers):
        body = {"model": MODEL, "max_tokens": 5, "messages": HELLO, "stream": True}
        raw = fetch(server.port, "POST", "/v1/messages", body, headers)
        events = sse.named(raw.body)
        # Keep-alives while it waited: comments, as no message has started (message_start waits
        # for the prompt's start, which says what the cache held).
        assert b": keep-alive" in raw.body and [name for name, _ in events] == ["error"]
        name, error = events[-1]
        assert name == "error" and error["error"]["type"] == "overloaded_error"
        with pytest.raises(anthropic.APIStatusError) as caught:  # not streamed: Anthropic's 529
            client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
        assert caught.value.status_code == 529


def test_cache_control_reports_what_is_written_then_read(client: anthropic.Anthropic) -> None:
    # A fresh system prompt of its own (nothing cached yet), marked for caching; a question after it.
    system = f"Session {uuid.uuid4().hex}. You are a careful geography tutor. " + "Answer briefly. " * 40
    marked = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    asked = [{"role": "user", "content": "Which river flows through Vienna?"}]
    whole = client.messages.count_tokens(model=MODEL, system=marked, messages=asked).input_tokens
    first = client.messages.create(model=MODEL, max_tokens=4, system=marked, messages=asked).usage
    read = first.cache_read_input_tokens or 0
    assert read < 10  # the template's opening, shared with earlier prompts: the rest is new
    assert first.cache_creation_input_tokens is not None and first.cache_creation_input_tokens > 150
    assert first.input_tokens + first.cache_creation_input_tokens + read == whole  # the question: not written
    assert first.input_tokens < 40
    second = client.messages.create(model=MODEL, max_tokens=4, system=marked, messages=asked).usage
    assert second.cache_creation_input_tokens == 0  # already written: read back now
    assert second.cache_read_input_tokens == whole - 1 and second.input_tokens == 1
    # The same conversation with no breakpoint writes nothing, whatever it reads.
    plain = client.messages.create(model=MODEL, max_tokens=4, system=system, messages=asked).usage
    assert plain.cache_creation_input_tokens == 0
    assert plain.input_tokens + (plain.cache_read_input_tokens or 0) == whole
    # Streamed: the last usage says the same.
    other = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "And Paris?", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    with client.messages.stream(model=MODEL, max_tokens=4, system=marked, messages=other) as stream:
        final = stream.get_final_message().usage
    assert final.cache_read_input_tokens is not None and final.cache_read_input_tokens > 150
    assert final.cache_creation_input_tokens is not None and 0 < final.cache_creation_input_tokens < 20
