"""The official openai Python SDK, sync and async, against the real server and model."""

from __future__ import annotations

import asyncio

import openai
import pytest

from harness.servers import Server

MODEL = "SmolLM2-135M-Instruct.Q4_1"
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name three colours."},
]
SEEDED = {"temperature": 0, "seed": 7, "max_tokens": 40}


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_chat_streamed_equals_not_streamed(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, **SEEDED)
    text = whole.choices[0].message.content
    assert text and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 10
    assert whole.model == MODEL and whole.object == "chat.completion"

    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True, **SEEDED)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_completion_streamed_equals_not_streamed(client: openai.OpenAI) -> None:
    prompt = "The capital of France is"
    whole = client.completions.create(model=MODEL, prompt=prompt, **SEEDED)
    text = whole.choices[0].text
    assert text and whole.object == "text_completion"
    stream = client.completions.create(model=MODEL, prompt=prompt, stream=True, **SEEDED)
    assert "".join(c.choices[0].text for c in stream) == text


def test_content_as_text_parts_and_developer_role(client: openai.OpenAI) -> None:
    as_parts = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "developer", "content": "You are a terse assistant."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Name three "}, {"type": "text", "text": "colours."}],
            },
        ],
        **SEEDED,
    )
    as_system = client.chat.completions.create(model=MODEL, messages=MESSAGES, **SEEDED)
    assert as_parts.choices[0].message.content == as_system.choices[0].message.content


def test_conversation_with_assistant_and_tool_turns(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": "What is 2+2?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a":2,"b":2}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "4"},
            {"role": "user", "content": "So?"},
        ],
        max_tokens=5,
    )
    assert reply.choices[0].message.role == "assistant"
    assert reply.usage.completion_tokens <= 5


def test_stop_string_is_never_sent(client: openai.OpenAI) -> None:
    free = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", **SEEDED).choices[0].text
    assert " 6" in free, free  # the model counts on, so the stop below really occurs
    kwargs = {**SEEDED, "stop": [" 6", "never"]}
    whole = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", **kwargs)
    streamed = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", stream=True, **kwargs)
    pieces = [c.choices[0].text for c in streamed]
    assert whole.choices[0].finish_reason == "stop"
    assert whole.choices[0].text == free[: free.index(" 6")]
    assert "".join(pieces) == whole.choices[0].text


def test_echo_prepends_the_prompt(client: openai.OpenAI) -> None:
    prompt = "Once upon a time"
    whole = client.completions.create(model=MODEL, prompt=prompt, echo=True, **SEEDED)
    plain = client.completions.create(model=MODEL, prompt=prompt, **SEEDED)
    assert whole.choices[0].text == prompt + plain.choices[0].text
    streamed = client.completions.create(model=MODEL, prompt=prompt, echo=True, stream=True, **SEEDED)
    assert "".join(c.choices[0].text for c in streamed) == whole.choices[0].text


def test_max_tokens_and_max_completion_tokens(client: openai.OpenAI) -> None:
    for kwargs in ({"max_tokens": 3}, {"max_completion_tokens": 3}):
        reply = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, temperature=1.5, seed=1, **kwargs
        )
        assert reply.usage.completion_tokens <= 3


def test_stream_usage_chunk(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}, **SEEDED
    )
    chunks = list(stream)
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_async_client_chat_and_completion(server: Server) -> None:
    async def run() -> tuple[str, str, str]:
        async with openai.AsyncOpenAI(
            base_url=server.url + "/v1", api_key="unused", max_retries=0
        ) as async_client:
            return await chat_and_complete(async_client)

    async def chat_and_complete(async_client: openai.AsyncOpenAI) -> tuple[str, str, str]:
        whole = await async_client.chat.completions.create(model=MODEL, messages=MESSAGES, **SEEDED)
        stream = await async_client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, **SEEDED
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
        completion = await async_client.completions.create(model=MODEL, prompt="Hello", max_tokens=5)
        return whole.choices[0].message.content, streamed, completion.choices[0].text

    whole, streamed, completion = asyncio.run(run())
    assert whole == streamed and whole
    assert isinstance(completion, str)


def test_sdk_errors_are_typed(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, temperature=3)
    assert bad.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as too_long:
        client.completions.create(model=MODEL, prompt="word " * 3000, max_tokens=10)
    assert too_long.value.code == "context_length_exceeded"
