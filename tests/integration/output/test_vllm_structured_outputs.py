"""vLLM's structured outputs (`structured_outputs`, and the older `guided_*` fields) on the shared server,
through the openai SDK's `extra_body` as vLLM's users send them: regular expressions and choices
hold for every seed, a JSON schema or a grammar constrains as the same constraint does under
llama-server's fields, and what cannot be followed is a 400 naming the field."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from harness.servers import Server

MODEL = "SmolLM2-135M-Instruct.Q4_1"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
PHONE = r"\(\d{3}\) \d{3}-\d{4}"
SENTENCE = r"[A-Z][a-z]{2,9} (is|was) [0-9]{1,3}( years old)?\."


def chat(content: str, **fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], "max_tokens": 40, **fields}


def sweep(url: str, path: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Post every body, two at a time; each must answer 200."""

    def post(body: dict[str, Any]) -> dict[str, Any]:
        reply = client.post(url + path, json=body)
        assert reply.status_code == 200, reply.text
        answer: dict[str, Any] = reply.json()
        return answer

    with httpx.Client(timeout=120) as client, ThreadPoolExecutor(2) as pool:
        return list(pool.map(post, bodies))


def test_a_regular_expression_holds_for_every_seed_on_both_routes(server: Server) -> None:
    bodies = [
        chat("What is the support phone number?", temperature=1.2, seed=seed,
             structured_outputs={"regex": PHONE})
        for seed in range(6)
    ]  # fmt: skip
    for answer in sweep(server.url, "/v1/chat/completions", bodies):
        (choice,) = answer["choices"]
        assert re.fullmatch(PHONE, choice["message"]["content"]), choice
        assert choice["finish_reason"] == "stop"
    texts = [
        {"prompt": "Alice's age:", "max_tokens": 40, "temperature": 1.2, "seed": seed,
         "guided_regex": SENTENCE}
        for seed in range(6)
    ]  # fmt: skip
    answers = [a["choices"][0]["text"] for a in sweep(server.url, "/v1/completions", texts)]
    assert all(re.fullmatch(SENTENCE, text) for text in answers), answers
    assert len(set(answers)) > 1  # sampled for real, not one forced string


def test_a_choice_is_one_of_the_strings_whole_and_streamed(client: openai.OpenAI) -> None:
    choices = ["positive", "negative", "mixed feelings"]
    ask = [{"role": "user", "content": "Classify the sentiment: I love this server!"}]
    for seed in range(4):
        whole = client.chat.completions.create(
            model=MODEL, messages=ask, temperature=1.5, seed=seed, extra_body={"guided_choice": choices}
        )
        assert whole.choices[0].message.content in choices
    stream = client.chat.completions.create(
        model=MODEL, messages=ask, stream=True, extra_body={"structured_outputs": {"choice": choices}}
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) in choices
    text = client.completions.create(
        model=MODEL, prompt="The answer is", max_tokens=8, extra_body={"guided_choice": ["yes", "no"]}
    )
    assert text.choices[0].text in ("yes", "no")


def test_a_json_schema_or_grammar_constrains_as_llama_servers_fields_do(server: Server) -> None:
    schema = PERSON
    base = chat("Extract the person: Alice is 31 years old.", temperature=0, max_tokens=60)

    def answer(**fields: Any) -> str:
        reply = httpx.post(server.url + "/v1/chat/completions", json={**base, **fields}, timeout=300)
        assert reply.status_code == 200, reply.text
        text: str = reply.json()["choices"][0]["message"]["content"]
        return text

    # llama-server's fields take its chat grammar (the JSON bare or ```json fenced); vLLM's, the
    # converter's grammar alone, as a schema is followed outside chat. Each is valid JSON.
    by_llama_field = answer(json_schema=schema)
    jsonschema.validate(json.loads(by_llama_field), schema)
    # llama-server's own form of response_format: json_object carrying a schema
    assert answer(response_format={"type": "json_object", "schema": schema}) == by_llama_field
    by_vllm_field = answer(structured_outputs={"json": json.dumps(schema)})  # JSON text
    jsonschema.validate(json.loads(by_vllm_field), schema)
    assert answer(guided_json=schema) == by_vllm_field
    any_object = answer(structured_outputs={"json_object": True})  # cut by max_tokens, maybe
    assert any_object.startswith("{") and any_object != answer()
    assert answer(json_schema={}).startswith("{")
    gbnf = 'root ::= "The person is " [A-Z] [a-z]+ "."'
    by_grammar = answer(grammar=gbnf)
    assert re.fullmatch(r"The person is [A-Z][a-z]+\.", by_grammar)
    assert answer(structured_outputs={"grammar": gbnf}) == answer(guided_grammar=gbnf) == by_grammar


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"structured_outputs": {"regex": "(a)\\1"}}, "structured_outputs.regex"),
        ({"guided_regex": "(unclosed"}, "guided_regex"),
        ({"guided_regex": "x(?=y)"}, "guided_regex"),
        ({"guided_regex": "a{5000}"}, "guided_regex"),
        ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
        ({"guided_json": "{not json"}, "guided_json"),
        ({"structured_outputs": {"json": {"type": "bogus"}}}, "structured_outputs.json"),
        ({"structured_outputs": {"grammar": "root ::= (("}}, "structured_outputs.grammar"),
        ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs.structural_tag.structures"),
        ({"guided_whitespace_pattern": " *"}, "guided_whitespace_pattern"),
        ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs.choice"),
        ({"guided_regex": "a", "json_schema": {}}, "guided_regex"),
        ({"response_format": {"type": "json_object"}, "guided_choice": ["a"]}, "guided_choice"),
        ({"guided_choice": ["a"], "tools": [{"type": "function", "function": {"name": "f"}}]},
         "guided_choice"),
    ],
)  # fmt: skip
def test_a_constraint_that_cannot_be_followed_is_a_400_naming_the_field(
    server: Server, fields: dict[str, Any], param: str
) -> None:
    reply = httpx.post(server.url + "/v1/chat/completions", json=chat("Hi", **fields), timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error


def test_a_constraint_the_model_cannot_write_ends_the_answer_and_the_worker_stays(server: Server) -> None:
    # SmolLM2's vocabulary has no token for U+0004: after "a" no token continues the grammar, where
    # llama.cpp would throw accepting one (and take the worker down). The answer ends there instead.
    body = {"prompt": "Hi", "max_tokens": 8, "guided_choice": ["a\u0004b"], "temperature": 0}
    answer = httpx.post(server.url + "/v1/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["text"] in ("", "a")
    assert "the grammar allows no token of this vocabulary here" in server.output()
    again = httpx.post(server.url + "/v1/completions", json={**body, "guided_choice": ["ok"]}, timeout=60)
    assert again.status_code == 200 and again.json()["choices"][0]["text"] == "ok"
    # A lone surrogate (a JSON escape no UTF-8 text holds) in a raw grammar: a 400, not a 500.
    raw = b'{"prompt": "Hi", "max_tokens": 4, "grammar": "root ::= \\"\\udada\\""}'
    refused = httpx.post(
        server.url + "/v1/completions", content=raw, headers={"Content-Type": "application/json"}, timeout=60
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "grammar", refused.text


TAG = {
    "type": "structural_tag",
    "structures": [
        {"begin": "<function=weather>", "schema": {**PERSON, "required": ["name"]}, "end": "</function>"}
    ],
    "triggers": ["<function="],
}


def follows_tag(text: str, tag: dict[str, Any]) -> bool:
    """Whether `text` is free text in which each trigger opens a whole structure (a reference reader)."""
    while True:
        found = [(text.find(t), t) for t in tag["triggers"] if t in text]
        if not found:
            return True
        at = min(found)[0]
        rest = text[at:]
        for structure in tag["structures"]:
            if rest.startswith(structure["begin"]):
                body = rest[len(structure["begin"]) :].lstrip(" \n\t")
                try:
                    value, used = json.JSONDecoder().raw_decode(body)
                    jsonschema.validate(value, structure["schema"])
                except (ValueError, jsonschema.ValidationError):
                    return False
                after = body[used:].lstrip(" \n\t")
                if not after.startswith(structure["end"]):
                    return False
                text = after[len(structure["end"]) :]
                break
        else:
            return False


def test_a_structural_tag_holds_for_every_seed_in_both_forms(server: Server) -> None:
    ask = "Use <function=weather>{...}</function> to look up the weather in Paris for Alice."
    as_text = {"structural_tag": json.dumps(TAG)}  # vLLM's structured_outputs takes it as JSON text
    bodies = [
        chat(ask, temperature=1.0, seed=seed, max_tokens=60, structured_outputs=as_text) for seed in range(4)
    ]
    bodies += [
        chat(ask, temperature=1.0, seed=seed, max_tokens=60, response_format=TAG) for seed in range(4, 6)
    ]
    answers = [
        answer["choices"][0]["message"]["content"]
        for answer in sweep(server.url, "/v1/chat/completions", bodies)
    ]
    for text in answers:
        assert follows_tag(text, TAG), text
    # A greedy answer asked to call opens the structure (what the tag is for), and it parses.
    greedy = sweep(
        server.url, "/v1/chat/completions", [chat(ask, temperature=0, max_tokens=60, response_format=TAG)]
    )
    text = greedy[0]["choices"][0]["message"]["content"]
    assert follows_tag(text, TAG), text


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        (
            {"structured_outputs": {"structural_tag": {**TAG, "triggers": ["<call>"]}}},
            "structured_outputs",
            "must start with one of the triggers",
        ),
        (
            {"structured_outputs": {"structural_tag": {"type": "structural_tag", "format": {}}}},
            "structured_outputs",
            "with `format` is not supported",
        ),
        (
            {"structured_outputs": {"structural_tag": "{not json"}},
            "structured_outputs",
            "this text is not JSON",
        ),
        (
            {"response_format": {"type": "structural_tag", "triggers": ["<f"]}},
            "response_format",
            "structures",
        ),
        (
            {"structured_outputs": {"structural_tag": {**TAG, "triggers": [""]}}},
            "structured_outputs",
            "Length must be between 1 and 64",
        ),
    ],
)
def test_a_structural_tag_that_cannot_be_followed_is_a_400_naming_it(
    server: Server, fields: dict[str, Any], param: str, message: str
) -> None:
    answer = httpx.post(server.url + "/v1/chat/completions", json=chat("Hi.", **fields), timeout=30)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"].startswith(param) and message in error["message"], error
