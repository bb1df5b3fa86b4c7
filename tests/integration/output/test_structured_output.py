"""Grammar-bound answers always parse: forced tool calls and JSON schemas across seeds, on every API;
and a schema constrains an answer as llama-server's does, on the same model at temperature 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jsonschema
import pytest

from app.engine.sampling import grammar
from app.settings.values import default_model_path
from harness import llama_server
from harness.servers import Server, Service

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


# Schemas of the kinds clients send: nested objects, arrays, enums and bounds, optional fields,
# strings with formats; each with a chat that makes SmolLM2 want to answer it.
SCHEMAS = {
    "person": (
        "Extract the person: Alice is 31 years old.",
        {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
         "required": ["name", "age"]},
    ),
    "nested": (
        "The book Dune, by Frank Herbert, is tagged sci-fi and classic. Give its title, tags and author.",
        {"type": "object", "required": ["title", "tags", "author"], "properties": {
            "title": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
            "author": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}},
    ),
    "enum-and-bounds": (
        "Pick a colour and a number of apples.",
        {"type": "object", "required": ["colour", "apples"], "properties": {
            "colour": {"enum": ["red", "green", "blue"]},
            "apples": {"type": "integer", "minimum": 0, "maximum": 12}}},
    ),
    "optional": (
        "Give a city, and its country if you know it.",
        {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string"}, "country": {"type": "string"}, "population": {"type": "number"}}},
    ),
    "array-of-objects": (
        "List three fruits with their colours.",
        {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "object", "required": ["fruit"],
         "properties": {"fruit": {"type": "string"}, "colour": {"type": "string"}}}},
    ),
    "formats": (
        "Give a date for a meeting and an id for it.",
        {"type": "object", "required": ["when", "id"], "properties": {
            "when": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}}},
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def server(reproducible_server: Server) -> Server:
    """Ours in the reproducible mode: its answers are compared with llama-server's bit for bit."""
    return reproducible_server


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    service = llama_server.start(default_model_path(), threads=1, slots=1, n_ctx=2048, same_kernels=True)
    yield service
    service.stop()


def chat_answer(server: Service, content: str, response_format: dict[str, Any]) -> tuple[str, str]:
    """A chat completion's answer under `response_format`, and the prompt the template made of it."""
    messages = [{"role": "user", "content": content}]
    body = {"messages": messages, "response_format": response_format, "temperature": 0, "max_tokens": 96}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    prompt = httpx.post(server.url + "/apply-template", json={"messages": messages}, timeout=60).json()[
        "prompt"
    ]
    return answer.json()["choices"][0]["message"]["content"], prompt


def streamed_chat_answer(server: Service, content: str, response_format: dict[str, Any]) -> str:
    """The content deltas of a streamed chat completion under `response_format`, joined."""
    messages = [{"role": "user", "content": content}]
    body = {"messages": messages, "response_format": response_format, "temperature": 0, "max_tokens": 96,
            "stream": True}  # fmt: skip
    joined = ""
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=300) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[len("data: ") :])["choices"]
                joined += (choices[0]["delta"].get("content") or "") if choices else ""
    return joined


def completion_answer(url: str, prompt: str, json_schema: dict[str, Any]) -> str:
    """llama-server's /completion under its `json_schema` field (llama.cpp's converter, as it is)."""
    body = {"prompt": prompt, "json_schema": json_schema, "temperature": 0, "n_predict": 96}
    answer = httpx.post(url + "/completion", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["content"]
    return text


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_a_schema_constrains_an_answer_as_llama_servers_converter_does(
    server: Server, reference: Service, name: str
) -> None:
    # The grammar is llama.cpp's own converter's (common/json-schema-to-grammar.cpp): the same
    # prompt under the same schema answers alike here and in llama-server, greedy, on one model;
    # in chat, as llama-server's chat grammar has it (the JSON bare or ```json fenced).
    content, schema = SCHEMAS[name]
    response_format = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    ours, prompt = chat_answer(server, content, response_format)
    assert ours == chat_answer(reference, content, response_format)[0]
    assert streamed_chat_answer(server, content, response_format) == ours
    assert completion_answer(server.url, prompt, schema) == completion_answer(reference.url, prompt, schema)
    jsonschema.validate(json.loads(ours), schema)  # whole, within max_tokens: nothing derailed


def test_a_fenced_json_answer_is_its_json_as_in_llama_servers_chat(
    server: Server, reference: Service
) -> None:
    # The case: SmolLM2 answers this one in a ```json fence when the grammar allows it, as
    # llama-server's chat grammar does; both then answer the JSON alone, pretty-printed alike.
    content, schema = "Extract the person: Alice is 31 years old.", SCHEMAS["person"][1]
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
    ours, prompt = chat_answer(server, content, response_format)
    assert ours == chat_answer(reference, content, response_format)[0]
    assert ours == streamed_chat_answer(server, content, response_format)
    assert json.loads(ours) == {"name": "Alice", "age": 31} and not ours.startswith("```")
    gbnf = grammar.fenced_schema_grammar(schema)
    fenced = {"prompt": prompt, "n_predict": 40, "temperature": 0, "grammar": gbnf}
    raw = httpx.post(server.url + "/completion", json=fenced, timeout=120).json()["content"]
    assert raw.startswith("```json") and ours in raw  # what the model wrote: the fence, read off
    body = {"messages": [{"role": "user", "content": content}], "json_schema": schema, "temperature": 0}
    field = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120).json()
    assert field["choices"][0]["message"]["content"] == ours  # llama-server's own field: the same grammar


def test_json_object_is_llama_servers_empty_schema(server: Server, reference: Service) -> None:
    content = "Tom is a grey cat. Give his name and colour."
    ours, prompt = chat_answer(server, content, {"type": "json_object"})
    assert ours == chat_answer(reference, content, {"type": "json_object"})[0]
    assert completion_answer(reference.url, prompt, {}) == completion_answer(server.url, prompt, {})
    assert isinstance(json.loads(ours), dict)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"json_schema": {"type": "bogus"}}, "json_schema"),
        ({"json_schema": {"type": "object"}, "grammar": 'root ::= "a"'}, "grammar"),
        ({"grammar": "root ::= (("}, "grammar"),
        ({"json_schema": [1]}, "json_schema"),
    ],
)
def test_a_constraint_llama_cpp_cannot_follow_is_a_400_naming_it(
    server: Server, body: dict[str, Any], param: str
) -> None:
    answer = httpx.post(server.url + "/completion", json={"prompt": "Hi", "n_predict": 4, **body}, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


def test_a_raw_grammar_is_followed(server: Server) -> None:
    body = {"prompt": "My favourite colour is", "n_predict": 8, "temperature": 0,
            "grammar": 'root ::= " " ("red" | "green" | "blue") "."'}  # fmt: skip
    answer = httpx.post(server.url + "/completion", json=body, timeout=60).json()
    assert answer["content"] in (" red.", " green.", " blue.") and answer["stop_type"] == "eos"


def test_llama_servers_own_fields_constrain_chat_and_text_completions(server: Server) -> None:
    content, schema = SCHEMAS["person"]
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
    by_response_format, prompt = chat_answer(server, content, response_format)
    messages = [{"role": "user", "content": content}]
    chat = {"messages": messages, "json_schema": schema, "temperature": 0, "max_tokens": 96}
    answer = httpx.post(server.url + "/v1/chat/completions", json=chat, timeout=300).json()
    assert answer["choices"][0]["message"]["content"] == by_response_format  # the same grammar
    text = {"prompt": prompt, "json_schema": schema, "temperature": 0, "max_tokens": 96}
    completed = httpx.post(server.url + "/v1/completions", json=text, timeout=300).json()["choices"][0][
        "text"
    ]
    jsonschema.validate(json.loads(completed), schema)
    yes_or_no = {"messages": messages, "grammar": 'root ::= "yes" | "no"', "max_tokens": 4}
    answer = httpx.post(server.url + "/v1/chat/completions", json=yes_or_no, timeout=300).json()
    assert answer["choices"][0]["message"]["content"] in ("yes", "no")
    tool = {"type": "function", "function": {"name": "save_note", "parameters": NOTE}}
    with_tools = httpx.post(
        server.url + "/v1/chat/completions", json={**yes_or_no, "tools": [tool]}, timeout=60
    )
    assert with_tools.status_code == 400 and with_tools.json()["error"]["param"] == "grammar"
