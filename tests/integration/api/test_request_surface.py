"""The rest of the OpenAI request surface through the openai SDK's own parsing, both stream modes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import openai
import pytest
from pydantic import BaseModel

from harness.servers import ROOT
from tests.support.clients import WEATHER

MODEL = "SmolLM2-135M-Instruct.Q4_1"
ASK = [{"role": "user", "content": "Tell me about a city."}]
TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}


def collect(stream: Any) -> dict[int, dict[str, Any]]:
    """Choices of a chat stream by index: text, finish reason, logprobs, tool-call deltas."""
    choices: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            entry = choices.setdefault(
                choice.index, {"text": "", "finish": None, "logprobs": [], "calls": []}
            )
            entry["text"] += choice.delta.content or ""
            entry["finish"] = choice.finish_reason or entry["finish"]
            if choice.logprobs and choice.logprobs.content:
                entry["logprobs"].extend(choice.logprobs.content)
            entry["calls"].extend(choice.delta.tool_calls or [])
    return choices


def test_n_choices_chat(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(
        model=MODEL, messages=ASK, n=3, max_tokens=12, temperature=1.2, seed=9
    )
    assert [c.index for c in whole.choices] == [0, 1, 2]
    texts = [c.message.content for c in whole.choices]
    assert len(set(texts)) > 1  # each generated for real, with its own seed
    assert whole.usage.completion_tokens > 12  # all choices counted
    streamed = collect(
        client.chat.completions.create(
            model=MODEL, messages=ASK, n=3, max_tokens=12, temperature=1.2, seed=9, stream=True
        )
    )
    assert [streamed[i]["text"] for i in range(3)] == texts


def test_n_choices_and_prompt_list_completions(client: openai.OpenAI) -> None:
    prompts = ["The sky is", "Water is"]
    whole = client.completions.create(model=MODEL, prompt=prompts, n=2, max_tokens=6, temperature=0)
    assert [c.index for c in whole.choices] == [0, 1, 2, 3]
    single = [
        client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0).choices[0].text
        for p in prompts
    ]
    # Choices come prompt by prompt: 0-1 for the first prompt, 2-3 for the second.
    assert [c.text for c in whole.choices] == [single[0], single[0], single[1], single[1]]
    streamed: dict[int, str] = {}
    for chunk in client.completions.create(
        model=MODEL, prompt=prompts, n=2, max_tokens=6, temperature=0, stream=True
    ):
        for choice in chunk.choices:
            streamed[choice.index] = streamed.get(choice.index, "") + choice.text
    assert [streamed[i] for i in range(4)] == [c.text for c in whole.choices]


def test_chat_logprobs(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3
    )
    content = whole.choices[0].logprobs.content
    assert len(content) == whole.usage.completion_tokens
    assert "".join(t.token for t in content) == whole.choices[0].message.content
    for token in content:
        assert token.logprob <= 0 and bytes(token.bytes).decode() == token.token
        assert len(token.top_logprobs) == 3
        assert token.top_logprobs[0].logprob >= token.logprob - 1e-6  # greedy: the top one was taken
    streamed = collect(
        client.chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3, stream=True
        )
    )[0]
    assert [t.token for t in streamed["logprobs"]] == [t.token for t in content]


def test_completion_logprobs(client: openai.OpenAI) -> None:
    whole = client.completions.create(
        model=MODEL, prompt="Once upon", max_tokens=6, temperature=0, logprobs=2, echo=True
    )
    logprobs = whole.choices[0].logprobs
    # Echo + logprobs: the prompt's two tokens come first (the first one scored by nothing), then six.
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == 2 + 6
    assert "".join(logprobs.tokens[:2]) == "Once upon"
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    # The two likeliest, and the token itself when it is not one of them (" upon" after "Once" may
    # not be), as OpenAI's: logprobs + 1 at most.
    chosen = zip(logprobs.tokens[1:], logprobs.token_logprobs[1:], logprobs.top_logprobs[1:], strict=True)
    for token, logprob, top in chosen:
        assert top[token] == logprob and len(top) <= 3
    assert [len(top) for top in logprobs.top_logprobs[2:]] == [2] * 6  # greedy: the likeliest is chosen
    zero = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=3, temperature=0, logprobs=0)
    assert zero.choices[0].logprobs is not None
    assert [list(top) for top in zero.choices[0].logprobs.top_logprobs] == [
        [t] for t in zero.choices[0].logprobs.tokens
    ]
    assert logprobs.text_offset[:3] == [0, len("Once"), len("Once upon")]
    text = whole.choices[0].text
    for token, offset in zip(logprobs.tokens, logprobs.text_offset, strict=True):
        assert text[offset : offset + len(token)] == token


def test_logit_bias_and_seed(client: openai.OpenAI) -> None:
    free = client.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0)
    first = free.choices[0].logprobs  # None: logprobs were not asked for
    assert first is None
    greedy = client.completions.create(model=MODEL, prompt="Hello", max_tokens=1, temperature=0, logprobs=1)
    top = greedy.choices[0].logprobs.tokens[0]
    top_id, banana_id = token_ids(top, " banana")
    banned = client.completions.create(
        model=MODEL,
        prompt="Hello",
        max_tokens=1,
        temperature=0,
        logprobs=1,
        logit_bias={str(top_id): -100},
    )
    assert banned.choices[0].logprobs.tokens[0] != top
    forced = client.completions.create(
        model=MODEL,
        prompt="Hello",
        max_tokens=3,
        temperature=0,
        logit_bias={str(banana_id): 100},
    )
    assert forced.choices[0].text == " banana" * 3
    seeded = [
        client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=20, temperature=1.0, seed=1234)
        .choices[0]
        .message.content
        for _ in range(2)
    ]
    assert seeded[0] == seeded[1]


TOKENIZE = """
import json, sys
from llama_cpp import Llama
from app.settings.values import default_model_path
vocab = Llama(model_path=default_model_path(), vocab_only=True, verbose=False)
print(json.dumps([vocab.tokenize(t.encode(), add_bos=False) for t in json.loads(sys.argv[1])]))
"""


def token_ids(*texts: str) -> list[int]:
    """Ids of texts that are one token each, from the model's vocabulary.

    In a child process: importing llama_cpp here would leave its /dev/null handles
    for this process's exit to complain about.
    """
    result = subprocess.run(
        [sys.executable, "-c", TOKENIZE, json.dumps(texts)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    tokenized = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(len(tokens) == 1 for tokens in tokenized), tokenized
    return [tokens[0] for tokens in tokenized]


def structured(client: openai.OpenAI, messages: list[dict[str, str]], response_format: dict[str, Any]) -> str:
    """The answer's text, streamed and not (temperature 0, so both are the same), finished by the model."""
    request = {
        "model": MODEL,
        "messages": messages,
        "max_tokens": 200,
        "temperature": 0,
        "response_format": response_format,
    }
    whole = client.chat.completions.create(**request).choices[0]
    streamed = collect(client.chat.completions.create(**request, stream=True))[0]
    assert whole.finish_reason == streamed["finish"] == "stop"  # not cut short by max_tokens
    assert streamed["text"] == whole.message.content
    return whole.message.content


def test_json_object_and_json_schema(client: openai.OpenAI) -> None:
    paris = [{"role": "user", "content": "Describe Paris as a JSON object with the keys name and country."}]
    assert json.loads(structured(client, paris, {"type": "json_object"}))["name"]
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "population": {"type": "integer"}},
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    text = structured(
        client,
        ASK,
        {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}},
    )
    jsonschema.validate(json.loads(text), schema)


class City(BaseModel):
    name: str
    population: int


def test_sdk_parse_with_a_pydantic_model(client: openai.OpenAI) -> None:
    parsed = client.chat.completions.parse(
        model=MODEL, messages=ASK, max_tokens=200, temperature=0, response_format=City
    )
    assert parsed.choices[0].finish_reason == "stop"
    assert isinstance(parsed.choices[0].message.parsed, City)


def test_unsupported_schema_feature_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "array", "minItems": 5000}},
            },
        )
    assert caught.value.body["param"] == "response_format.json_schema.schema"


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_forced_tool_call(client: openai.OpenAI, tool_choice: Any) -> None:
    request = {
        "model": MODEL,
        "max_tokens": 200,
        "temperature": 0,
        "tools": [WEATHER, TIME],
        "tool_choice": tool_choice,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    }
    whole = client.chat.completions.create(**request)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    if isinstance(tool_choice, dict):
        assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        jsonschema.validate(arguments, WEATHER["function"]["parameters"])

    streamed = collect(client.chat.completions.create(**request, stream=True))[0]
    assert streamed["finish"] == "tool_calls" and streamed["text"] == ""
    deltas = streamed["calls"]
    assert deltas[0].id.startswith("call_") and deltas[0].function.name and deltas[0].function.arguments == ""
    assert all(d.index == 0 and d.id is None for d in deltas[1:]) and len(deltas) > 2  # arguments in pieces
    assert isinstance(json.loads("".join(d.function.arguments for d in deltas)), dict)


def test_tool_choice_none_and_auto_answer(client: openai.OpenAI) -> None:
    for choice in ("none", "auto"):
        reply = client.chat.completions.create(
            model=MODEL,
            max_tokens=30,
            tools=[WEATHER],
            tool_choice=choice,
            parallel_tool_calls=False,
            messages=ASK,
        )
        message = reply.choices[0].message
        if reply.choices[0].finish_reason == "tool_calls":
            assert choice == "auto" and message.tool_calls[0].function.name == "get_weather"
        else:
            assert message.content and not message.tool_calls


def test_best_of_and_stop_strings(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=MODEL, prompt="Hi", best_of=3, n=1)
    assert caught.value.body["param"] == "best_of"
    assert (
        client.completions.create(model=MODEL, prompt="Hi", best_of=2, n=2, max_tokens=2).choices[1].index
        == 1
    )
    stops = [" 5", " 6", " 7", " 8"]
    for stream in (False, True):
        reply = client.completions.create(
            model=MODEL, prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=stops, stream=stream
        )
        text = "".join(c.choices[0].text for c in reply) if stream else reply.choices[0].text
        assert text == "" or not any(s in text for s in stops)
        assert not text.endswith(" ")
