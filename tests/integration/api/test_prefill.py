"""Assistant prefill: a chat whose last message is the assistant's is continued, as llama-server does
(`--prefill-assistant`, its default), through chat completions, Anthropic's Messages (its
documented prefill) and Ollama's /api/chat, and vLLM's explicit `continue_final_message`.
The prompt is llama-server's, byte for byte, and so is the greedy answer, on the same model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import ollama
import pytest

from app.settings.values import default_model_path
from harness import llama_server
from harness.servers import Server, Service

MODEL = "SmolLM2-135M-Instruct.Q4_1"
PREFILLED = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is"},
]


@pytest.fixture(scope="module")
def server(reproducible_server: Server) -> Server:
    """Ours in the reproducible mode: its answers are compared with llama-server's bit for bit."""
    return reproducible_server


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    service = llama_server.start(str(default_model_path()), threads=1, slots=1, n_ctx=2048, same_kernels=True)
    yield service
    service.stop()


def rendered(url: str, messages: list[dict[str, Any]], **fields: Any) -> str:
    reply = httpx.post(url + "/apply-template", json={"messages": messages, **fields}, timeout=60)
    assert reply.status_code == 200, reply.text
    prompt: str = reply.json()["prompt"]
    return prompt


def answered(url: str, messages: list[dict[str, Any]], **fields: Any) -> str:
    body = {"messages": messages, "max_tokens": 16, "temperature": 0, **fields}
    reply = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    content: str = reply.json()["choices"][0]["message"]["content"]
    return content


def test_a_trailing_assistant_message_is_continued_as_llama_server_does(
    server: Server, reference: Service
) -> None:
    prompt = rendered(server.url, PREFILLED)
    assert prompt == rendered(reference.url, PREFILLED)
    assert prompt.endswith("<|im_start|>assistant\nThe capital of France is")  # no end of turn after it
    ours = answered(server.url, PREFILLED)
    # The same tokens; llama-server's message repeats the prefill before them, ours (as Anthropic's
    # and vLLM's) holds only what the model added.
    assert answered(reference.url, PREFILLED) == PREFILLED[-1]["content"] + ours
    assert ours and not ours.startswith("The capital")
    explicit = {"continue_final_message": True, "add_generation_prompt": False}
    assert rendered(server.url, PREFILLED, **explicit) == prompt
    assert answered(server.url, PREFILLED, **explicit) == ours
    # Without the generation prompt, and no continuation: the messages as they are, turn closed.
    closed = PREFILLED[:2]
    assert rendered(server.url, closed, add_generation_prompt=False) == rendered(
        reference.url, closed, add_generation_prompt=False
    )
    assert rendered(server.url, closed, add_generation_prompt=False).endswith("<|im_end|>\n")


def test_anthropic_and_ollama_prefills_continue_the_same_way(server: Server) -> None:
    expected = answered(server.url, PREFILLED)
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as sdk:
        message = sdk.messages.create(
            model=MODEL,
            system=PREFILLED[0]["content"],
            messages=[{"role": m["role"], "content": m["content"]} for m in PREFILLED[1:]],
            max_tokens=16,
            extra_body={"temperature": 0},
        )
        assert message.content[0].type == "text" and message.content[0].text == expected
        with sdk.messages.stream(
            model=MODEL,
            system=PREFILLED[0]["content"],
            messages=[{"role": m["role"], "content": m["content"]} for m in PREFILLED[1:]],
            max_tokens=16,
            extra_body={"temperature": 0},
        ) as stream:
            assert "".join(stream.text_stream) == expected
    with ollama.Client(host=server.url) as client:
        options = {"temperature": 0, "num_predict": 16}
        reply = client.chat(model=MODEL, messages=PREFILLED, options=options)
        assert reply.message.content == expected


@pytest.mark.parametrize(
    ("messages", "fields", "param"),
    [
        (PREFILLED, {"continue_final_message": True}, "continue_final_message"),
        (PREFILLED[:2], {"continue_final_message": True, "add_generation_prompt": False}, "messages"),
        ([*PREFILLED, {"role": "assistant", "content": " Paris"}], {}, "messages"),
        (
            [*PREFILLED[:2], {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
            {"continue_final_message": True, "add_generation_prompt": False},
            "messages",
        ),
    ],
)  # fmt: skip
def test_a_continuation_that_cannot_be_is_a_400(
    server: Server, messages: list[dict[str, Any]], fields: dict[str, Any], param: str
) -> None:
    body = {"messages": messages, "max_tokens": 4, **fields}
    reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
