"""Grammar-bound answers always parse: forced tool calls and JSON schemas across seeds, on every API."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jsonschema

from harness.servers import Server

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "motto": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "motto", "age"],
    "additionalProperties": False,
}
NOTE = {"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
        "required": ["title", "body"]}  # fmt: skip
ASK = [{"role": "user", "content": "Write a short note with a title and a body of two lines."}]


def sweep(url: str, path: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Post every body, four at a time (the worker's four sequences)."""
    with httpx.Client(timeout=120) as client, ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda body: client.post(url + path, json=body).json(), bodies))


def test_forced_tool_calls_parse_for_every_seed(server: Server) -> None:
    tool = {"type": "function", "function": {"name": "save_note", "parameters": NOTE}}
    bodies = [
        {"messages": ASK, "tools": [tool], "tool_choice": "required", "max_tokens": 150, "seed": seed,
         "temperature": 1.0}
        for seed in range(16)
    ]  # fmt: skip
    finished = 0
    for answer in sweep(server.url, "/v1/chat/completions", bodies):
        choice = answer["choices"][0]
        (call,) = choice["message"]["tool_calls"]  # a call, never plain content
        assert choice["message"]["content"] is None
        if choice["finish_reason"] == "tool_calls":
            finished += 1
            jsonschema.validate(json.loads(call["function"]["arguments"]), NOTE)
        else:
            assert choice["finish_reason"] == "length"
    assert finished >= 8, finished  # most end by themselves; every one that did parsed


def test_json_schema_answers_parse_for_every_seed(server: Server) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    bodies = [
        {"messages": [{"role": "user", "content": "Invent a person."}], "response_format": response_format,
         "max_tokens": 150, "seed": seed, "temperature": 1.0}
        for seed in range(16)
    ]  # fmt: skip
    finished = 0
    for answer in sweep(server.url, "/v1/chat/completions", bodies):
        choice = answer["choices"][0]
        if choice["finish_reason"] == "stop":
            finished += 1
            jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
    assert finished >= 8, finished


def test_responses_and_messages_parse_for_every_seed(server: Server) -> None:
    text_format = {"format": {"type": "json_schema", "name": "person", "schema": PERSON}}
    responses = sweep(
        server.url,
        "/v1/responses",
        [{"input": "Invent a person.", "text": text_format, "max_output_tokens": 150, "seed": seed,
          "temperature": 1.0} for seed in range(12)],
    )  # fmt: skip
    completed = [r for r in responses if r["status"] == "completed"]
    assert len(completed) >= 6
    for response in completed:
        jsonschema.validate(json.loads(response["output"][0]["content"][0]["text"]), PERSON)
    tool = {"name": "save_note", "input_schema": NOTE}
    messages = sweep(
        server.url,
        "/v1/messages",
        [{"model": "SmolLM2-135M-Instruct.Q4_1", "messages": ASK, "tools": [tool],
          "tool_choice": {"type": "any"}, "max_tokens": 150, "temperature": 1.0} for _ in range(12)],
    )  # fmt: skip
    used = [m for m in messages if m["stop_reason"] == "tool_use"]
    assert len(used) >= 6
    for message in used:
        (block,) = message["content"]
        jsonschema.validate(block["input"], NOTE)


def test_a_forced_call_cut_short_is_still_a_call(server: Server) -> None:
    tool = {"type": "function", "function": {"name": "save_note", "parameters": NOTE}}
    body = {"messages": ASK, "tools": [tool], "tool_choice": "required", "max_tokens": 24, "temperature": 0}
    whole = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60).json()["choices"][0]
    assert whole["finish_reason"] == "length" and whole["message"]["content"] is None
    (call,) = whole["message"]["tool_calls"]
    assert call["function"]["name"] == "save_note" and call["function"]["arguments"].startswith("{")
    streamed = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60)
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert deltas[0]["function"]["name"] == "save_note"
    assert "".join(d["function"].get("arguments", "") for d in deltas).startswith("{")
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert not any(c["choices"][0]["delta"].get("content") for c in chunks)
