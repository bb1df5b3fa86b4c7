"""A conversation longer than the context: refused, or its oldest whole turns dropped, said in a header.

The model runs with a template that raises on a tool result without its call, and on a
conversation that does not begin with the user, so a truncation that split a turn would
fail to render. The answer after truncation is compared with the answer to the shorter
conversation sent as such: the same prompt, the same tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models

STRICT = """
{%- for message in messages -%}
{%- set previous = messages[loop.index0 - 1] if loop.index0 > 0 else none -%}
{%- set called = previous is not none and (previous.role == 'tool' or previous.tool_calls) -%}
{%- if message.role == 'tool' and not called -%}
{{- raise_exception('a tool result without its call') -}}
{%- endif -%}
{%- if previous is not none and previous.role == 'system' and message.role != 'user' -%}
{{- raise_exception('the conversation must begin with the user') -}}
{%- endif -%}
<|im_start|>{{ message.role }}
{{ message.content or '' }}
{%- for call in message.tool_calls or [] %}<tool_call>{{ call.function.name }}</tool_call>{% endfor -%}
<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
"""
N_CTX = 512
SYSTEM = {"role": "system", "content": "You are a weather assistant. Answer in one short sentence."}


def turn(n: int) -> list[dict[str, Any]]:
    """A turn of about 70 tokens; every third calls a tool and reads its result."""
    city = ["Paris", "Lima", "Oslo", "Cairo", "Perth", "Quito", "Tokyo", "Dakar", "Hanoi", "Rome"][n]
    ask = {"role": "user", "content": f"Question {n}: what is the weather like in {city} today? " * 3}
    if n % 3:
        return [
            ask,
            {"role": "assistant", "content": f"In {city} it is mild and dry, about {n + 12} degrees."},
        ]
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    return [
        ask,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": f"{city}: sunny, {n + 10} degrees"},
        {"role": "assistant", "content": f"It is sunny in {city}."},
    ]


LONG = [SYSTEM] + [m for n in range(10) for m in turn(n)] + [{"role": "user", "content": "And in Rome?"}]


MODELS = [
    {"id": "strict", "path": default_model_path(), "workers": 1, "n_ctx": N_CTX, "chat_template": STRICT}
]


@pytest.fixture(scope="module")
def refusing() -> Iterator[Server]:
    # The reproducible kernels: a truncated conversation's answer is compared with the shorter
    # conversation's, whose prompt the server then has in its cache.
    with serving_models(MODELS, LLM_BATCH_INVARIANT="1") as server:
        yield server


@pytest.fixture(scope="module")
def truncating() -> Iterator[Server]:
    with serving_models(MODELS, LLM_CONTEXT_OVERFLOW="truncate") as server:
        yield server


def chat(server: Server, messages: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    body = {"model": "strict", "messages": messages, "max_tokens": 16, "temperature": 0, **extra}
    return httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)


def test_by_default_an_overlong_conversation_is_refused(refusing: Server) -> None:
    answer = chat(refusing, LONG)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "context_length_exceeded"
    assert chat(refusing, LONG, truncation="disabled").status_code == 400
    assert chat(refusing, LONG, truncation="sometimes").json()["error"]["param"] == "truncation"


def test_truncation_drops_whole_oldest_turns_and_answers_as_the_shorter_conversation(
    refusing: Server,
) -> None:
    client = openai.OpenAI(base_url=refusing.url + "/v1", api_key="none")
    try:
        raw = client.chat.completions.with_raw_response.create(
            model="strict", messages=LONG, max_tokens=16, temperature=0, extra_body={"truncation": "auto"}
        )
    finally:
        client.close()
    dropped = int(raw.headers["x-context-truncated-messages"])
    truncated = raw.parse()
    assert truncated.usage is not None and truncated.usage.prompt_tokens <= N_CTX - 16
    kept = [SYSTEM] + LONG[1 + dropped :]
    assert kept[1]["role"] == "user" and kept[-1] == LONG[-1]  # whole turns: the next one begins
    direct = chat(refusing, kept).json()
    assert direct["usage"]["prompt_tokens"] == truncated.usage.prompt_tokens
    assert direct["choices"][0]["message"]["content"] == truncated.choices[0].message.content
    # The fewest: one turn more would not have fitted.
    one_more = [SYSTEM] + LONG[1 + dropped - _turn_length(LONG, dropped) :]
    assert chat(refusing, one_more).status_code == 400
    assert re.search(rf"dropped_messages={dropped}\b", refusing.output())


def _turn_length(messages: list[dict[str, Any]], dropped: int) -> int:
    """How many messages the last dropped turn had (it began at the last user message dropped)."""
    starts = [i for i in range(1, 1 + dropped) if messages[i]["role"] == "user"]
    return 1 + dropped - starts[-1]


def test_the_server_setting_truncates_every_family_and_a_request_may_refuse(truncating: Server) -> None:
    assert chat(truncating, LONG).status_code == 200
    assert chat(truncating, LONG, truncation="disabled").status_code == 400
    client = openai.OpenAI(base_url=truncating.url + "/v1", api_key="none")
    messages = anthropic.Anthropic(base_url=truncating.url, api_key="none")
    try:
        items = [
            {"role": m["role"], "content": m["content"]} for m in LONG if m["role"] != "tool" and m["content"]
        ]
        response = client.responses.create(model="strict", input=items, max_output_tokens=16)
        assert response.truncation == "auto" and response.usage is not None
        assert response.usage.input_tokens <= N_CTX - 16
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model="strict", input=items, max_output_tokens=16, truncation="disabled")
        said = messages.messages.with_raw_response.create(
            model="strict", max_tokens=16, system=SYSTEM["content"],
            messages=[m for m in items if m["role"] != "system"],
        )  # fmt: skip
        assert int(said.headers["x-context-truncated-messages"]) > 0 and said.parse().content
    finally:
        client.close()
        messages.close()


def test_without_max_tokens_a_quarter_of_the_context_is_left_for_the_answer(refusing: Server) -> None:
    body = {"model": "strict", "messages": LONG, "temperature": 0, "truncation": "auto"}
    answer = httpx.post(refusing.url + "/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    assert N_CTX // 2 < answer.json()["usage"]["prompt_tokens"] <= N_CTX - N_CTX // 4


def test_ollamas_chat_truncates_to_the_context_or_its_num_ctx(truncating: Server) -> None:
    messages = [
        {"role": m["role"], "content": m["content"]} for m in LONG if m["role"] != "tool" and m["content"]
    ]
    for options, window in (({}, N_CTX), ({"num_ctx": 256}, 256)):
        body = {
            "model": "strict",
            "messages": messages,
            "stream": False,
            "options": {**options, "temperature": 0},
        }
        answer = httpx.post(truncating.url + "/api/chat", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
        assert int(answer.headers["x-context-truncated-messages"]) > 0
        assert answer.json()["prompt_eval_count"] <= window - window // 4
