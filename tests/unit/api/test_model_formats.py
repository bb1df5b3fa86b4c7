"""Scripted answers in real models' formats through every protocol: calls and reasoning read, never leaked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from flask.testing import FlaskClient

from app import create_app
from app.api.anthropic import openapi as anthropic_openapi
from app.api.anthropic.schemas import messages_request_schema
from app.api.responses import conversion as responses_conversion
from app.api.responses import openapi as responses_openapi
from app.api.responses.schemas import response_request_schema
from app.engine.types import Chunk
from tests.support import sse
from tests.unit.conftest import MODEL_ID, FakeEngine, make_config

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "Weather in Oslo?"}]
THOUGHT_AND_CALL = [
    "<think>\nThe user",
    " wants weather.\n</thi",
    "nk>\n\nLet me look.\n<tool_",
    'call>\n{"name": "get_weather", "arguments": {"ci',
    'ty": "Oslo"}}\n</tool_call>',
]


@pytest.fixture
def engine() -> FakeEngine:
    engine = FakeEngine()
    engine.tokenizer.chat_template = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text()
    engine.chunks = [Chunk(piece) for piece in THOUGHT_AND_CALL[:-1]] + [
        Chunk(THOUGHT_AND_CALL[-1], "stop", 30)
    ]
    return engine


@pytest.fixture
def client(engine: FakeEngine) -> FlaskClient:
    return create_app(make_config(LLM_N_CTX="8192"), engine=engine).test_client()


def test_chat_reads_reasoning_text_and_calls_and_asks_for_a_lazy_grammar(
    client: FlaskClient, engine: FakeEngine
) -> None:
    body = client.post("/v1/chat/completions", json={"messages": ASK, "tools": [WEATHER]}).get_json()
    (choice,) = body["choices"]
    message = choice["message"]
    assert message["reasoning_content"] == "The user wants weather."
    assert message["content"] == "Let me look."
    (call,) = message["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert choice["finish_reason"] == "tool_calls"
    request = engine.plans[0]
    assert request.grammar and "<tool_call>" in request.grammar
    assert any("<tool_call>" in pattern for pattern in request.grammar_triggers)  # auto: lazy


def test_chat_streams_reasoning_then_text_then_the_call(client: FlaskClient) -> None:
    response = client.post("/v1/chat/completions", json={"messages": ASK, "tools": [WEATHER], "stream": True})
    deltas = [p["choices"][0]["delta"] for p in sse.payloads(response.get_data()) if p != "[DONE]"]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    calls = [c for d in deltas for c in d.get("tool_calls") or []]
    assert reasoning.strip() == "The user wants weather." and content.strip() == "Let me look."
    assert calls[0]["id"] and calls[0]["function"]["name"] == "get_weather"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"city": "Oslo"}
    assert "<" not in content + reasoning


def test_reasoning_format_none_leaves_the_thinking_in_the_content(client: FlaskClient) -> None:
    body = client.post("/v1/chat/completions", json={"messages": ASK, "reasoning_format": "none"}).get_json()
    message = body["choices"][0]["message"]
    assert "reasoning_content" not in message and message["content"].startswith("<think>")


def test_messages_give_thinking_text_and_tool_use_blocks(client: FlaskClient) -> None:
    tool = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}
    request = {"model": MODEL_ID, "max_tokens": 50, "messages": ASK, "tools": [tool]}
    whole = client.post("/v1/messages", json=request).get_json()
    assert [b["type"] for b in whole["content"]] == ["thinking", "text", "tool_use"]
    assert whole["content"][2]["input"] == {"city": "Oslo"} and whole["stop_reason"] == "tool_use"
    events = sse.named(client.post("/v1/messages", json={**request, "stream": True}).get_data())
    starts = [e["content_block"]["type"] for name, e in events if name == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    thinking = "".join(e["delta"].get("thinking", "") for n, e in events if n == "content_block_delta")
    partial = "".join(e["delta"].get("partial_json", "") for n, e in events if n == "content_block_delta")
    assert thinking.strip() == "The user wants weather." and json.loads(partial) == {"city": "Oslo"}


def test_responses_give_reasoning_message_and_function_call_items(client: FlaskClient) -> None:
    tool = {"type": "function", **WEATHER["function"]}
    request = {"input": "Weather in Oslo?", "tools": [tool]}
    whole = client.post("/v1/responses", json=request).get_json()
    assert [item["type"] for item in whole["output"]] == ["reasoning", "message", "function_call"]
    assert whole["output"][0]["content"][0]["text"] == "The user wants weather."
    events = sse.named(client.post("/v1/responses", json={**request, "stream": True}).get_data())
    kinds = [name for name, _ in events]
    assert "response.reasoning_text.delta" in kinds and "response.function_call_arguments.delta" in kinds
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))


def test_reasoning_handed_back_reaches_the_template(client: FlaskClient) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    messages = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I should look it up.",
            "tool_calls": [call],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    prompt = client.post("/apply-template", json={"messages": messages, "tools": [WEATHER]}).get_json()[
        "prompt"
    ]
    assert (
        "<think>\nI should look it up.\n</think>" in prompt
        and "<tool_response>\nsunny\n</tool_response>" in prompt
    )
    responses_input = [
        {"type": "message", "role": "user", "content": "Weather in Oslo?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "Look it up."}],
        },
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    counted = client.post("/v1/responses/input_tokens", json={"input": responses_input})
    assert counted.status_code == 200


def test_props_name_the_format_and_the_template_caps(client: FlaskClient) -> None:
    props = client.get("/props").get_json()
    assert props["chat_format"] == "Hermes 2 Pro"
    assert props["chat_template_caps"]["supports_tools"] and props["chat_template_caps"]["supports_thinking"]


def test_reasoning_items_and_thinking_blocks_handed_back_become_the_turns_reasoning() -> None:
    body = response_request_schema.load(
        {
            "input": [
                {"type": "message", "role": "user", "content": "Weather?"},
                {"type": "reasoning", "id": "rs_1", "summary": [],
                 "content": [{"type": "reasoning_text", "text": "Look it up."}]},
                {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            ]
        }
    )  # fmt: skip
    assert responses_conversion.messages(body)[-1]["reasoning_content"] == "Look it up."
    message = messages_request_schema.load(
        {
            "model": MODEL_ID,
            "max_tokens": 5,
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look it up.", "signature": ""},
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}},
                ]},
            ],
        }
    ).chat  # fmt: skip
    assert message.messages[-1]["reasoning_content"] == "Look it up."


BAD_CHAT: dict[str, dict[str, Any]] = {
    "tools: [{}]": {"tools": [{}]},
    "parameters that are not an object": {
        "tools": [{"type": "function", "function": {"name": "x", "parameters": "s"}}],
    },
    "a schema the grammar cannot follow": {
        "tools": [{"type": "function", "function": {"name": "x", "parameters": {
            "type": "object", "properties": {"a": {"$ref": "#/definitions/nope"}}}}}],
        "tool_choice": "required",
    },
    "tool_choice without a name": {"tools": [WEATHER], "tool_choice": {"type": "function"}},
    "an earlier call with nothing in it": {
        "messages": [*ASK, {"role": "assistant", "content": None, "tool_calls": [{}]}],
    },
    "template variables the server sets": {"chat_template_kwargs": {"messages": 1}},
    "a tool result without its call (Mistral's and GPT-OSS's templates refuse it)": {
        "messages": [*ASK, {"role": "tool", "content": "x"}], "tools": [WEATHER],
    },
}  # fmt: skip


@pytest.mark.parametrize(
    "template", ["Qwen-Qwen2.5-7B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407", "openai-gpt-oss-120b"]
)
@pytest.mark.parametrize("case", list(BAD_CHAT))
def test_malformed_tool_input_is_a_400_never_a_500(engine: FakeEngine, template: str, case: str) -> None:
    engine.tokenizer.chat_template = (TEMPLATES / f"{template}.jinja").read_text()
    client = create_app(make_config(LLM_N_CTX="8192"), engine=engine).test_client()
    body = {"messages": ASK, **BAD_CHAT[case]}
    answer = client.post("/v1/chat/completions", json=body)
    if case.startswith("a tool result without") and "Qwen" in template:
        assert answer.status_code == 200  # Qwen's renders it
        return
    assert answer.status_code == 400, answer.get_json()
    assert answer.get_json()["error"]["type"] == "invalid_request_error"


def test_malformed_tools_in_messages_and_responses_are_400s_in_their_shapes(client: FlaskClient) -> None:
    messages = client.post(
        "/v1/messages",
        json={
            "model": MODEL_ID,
            "max_tokens": 10,
            "messages": ASK,
            "tools": [{"name": "w", "input_schema": "s"}],
        },
    )
    assert messages.status_code == 400 and messages.get_json()["type"] == "error"
    responses = client.post(
        "/v1/responses", json={"input": "hi", "tools": [{"type": "function", "name": "w", "parameters": "s"}]}
    )
    assert responses.status_code == 400 and responses.get_json()["error"]["param"]


def test_under_auto_a_json_answer_keeps_its_own_grammar(client: FlaskClient, engine: FakeEngine) -> None:
    body = {"messages": ASK, "tools": [WEATHER], "response_format": {"type": "json_object"}}
    assert client.post("/v1/chat/completions", json=body).status_code == 200
    request = engine.plans[-1]
    assert request.grammar and "<tool_call>" not in request.grammar and not request.grammar_triggers
    forced = client.post("/v1/chat/completions", json={**body, "tool_choice": "required"})
    assert forced.status_code == 200 and "<tool_call>" in (engine.plans[-1].grammar or "")


def test_deepseek_legacy_keeps_the_thinking_in_the_content_and_splits_it_too(client: FlaskClient) -> None:
    body = {"messages": ASK, "reasoning_format": "deepseek-legacy"}
    message = client.post("/v1/chat/completions", json=body).get_json()["choices"][0]["message"]
    assert message["reasoning_content"] == "The user wants weather."
    assert message["content"].startswith("<think>\nThe user wants weather.\n</think>")
    events = sse.payloads(client.post("/v1/chat/completions", json={**body, "stream": True}).get_data())
    streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e != "[DONE]")
    assert streamed == message["content"]


def _conforms(document: dict, schema: dict, value: object) -> None:
    """`value` validates against `schema`, its $refs read from the served document."""
    jsonschema.Draft202012Validator({**schema, "components": document["components"]}).validate(value)


def _component(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def test_reasoning_and_calls_are_in_the_documented_shapes(client: FlaskClient) -> None:
    document = client.get("/openapi.json").get_json()
    chat = client.post("/v1/chat/completions", json={"messages": ASK, "tools": [WEATHER]}).get_json()
    _conforms(document, _component("ChatCompletion"), chat)
    stream = client.post("/v1/chat/completions", json={"messages": ASK, "tools": [WEATHER], "stream": True})
    for chunk in sse.payloads(stream.get_data())[:-1]:
        _conforms(document, _component("ChatCompletionChunk"), chunk)
    tool = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}
    request = {"model": MODEL_ID, "max_tokens": 50, "messages": ASK, "tools": [tool]}
    _conforms(document, _component("AnthropicMessage"), client.post("/v1/messages", json=request).get_json())
    for name, event in sse.named(client.post("/v1/messages", json={**request, "stream": True}).get_data()):
        _conforms(document, anthropic_openapi.EVENTS[name], event)
    responses = {"input": "Weather?", "tools": [{"type": "function", **WEATHER["function"]}]}
    _conforms(document, _component("Response"), client.post("/v1/responses", json=responses).get_json())
    for name, event in sse.named(client.post("/v1/responses", json={**responses, "stream": True}).get_data()):
        _conforms(document, responses_openapi.EVENTS[name], event)
