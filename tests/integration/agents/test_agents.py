"""Agents on real models' formats: the default model served with Qwen 2.5's and Llama 3.1's templates,
calls forced and woken by the lazy grammar, through the openai and anthropic SDKs and /v1/responses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support.clients import openai_client

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
MODELS = [
    {"id": "qwen", "path": default_model_path(), "workers": 1, "n_ctx": 4096,
     "chat_template": (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()},
    {"id": "llama", "path": default_model_path(), "workers": 1, "n_ctx": 4096,
     "chat_template": (TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text()},
]  # fmt: skip
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
MARKUP = ("<tool_call>", "</tool_call>", "<|python_tag|>", '"name"')


@pytest.fixture(scope="module")
def agents_server() -> Iterator[Server]:
    with serving_models(MODELS, answers=2, LLM_SSE_KEEPALIVE="1") as server:
        yield server


@pytest.fixture
def client(agents_server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(agents_server) as sdk:
        yield sdk


def _forced(model: str) -> dict:
    return {
        "model": model,
        "messages": ASK,
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
        "max_tokens": 60,
        "temperature": 0,
    }


@pytest.mark.parametrize(("model", "fmt"), [("qwen", "Hermes 2 Pro"), ("llama", "Llama 3.x")])
def test_props_say_which_format_the_template_speaks(agents_server: Server, model: str, fmt: str) -> None:
    props = httpx.get(agents_server.url + "/props", params={"model": model}, timeout=30).json()
    assert props["chat_format"] == fmt and props["model_alias"] == model
    assert props["chat_template_caps"]["supports_tools"] is True


def test_a_template_that_prints_the_date_gets_today_as_llama_server_gives_it(agents_server: Server) -> None:
    # Llama 3.1's template writes "Today Date: " + date_string, "26 Jul 2024" when unset;
    # llama-server gives it today's date (common/chat.cpp), and chat_template_kwargs over it.
    def prompt(**fields: Any) -> str:
        body = {"model": "llama", "messages": ASK, **fields}
        reply = httpx.post(agents_server.url + "/apply-template", json=body, timeout=30)
        assert reply.status_code == 200, reply.text
        text: str = reply.json()["prompt"]
        return text

    before = datetime.now().strftime("%d %b %Y")
    today = prompt()
    after = datetime.now().strftime("%d %b %Y")
    assert f"Today Date: {before}\n" in today or f"Today Date: {after}\n" in today, today
    assert "26 Jul 2024" not in today
    assert "Today Date: 01 Jan 2030\n" in prompt(chat_template_kwargs={"date_string": "01 Jan 2030"})


@pytest.mark.parametrize("model", ["qwen", "llama"])
def test_a_forced_call_comes_back_parsed_whole_and_streamed(client: openai.OpenAI, model: str) -> None:
    whole = client.chat.completions.create(**_forced(model))
    (choice,) = whole.choices
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and call.id
    assert set(json.loads(call.function.arguments)) == {"city"}
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    stream = client.chat.completions.create(**_forced(model), stream=True)
    names, arguments, content = [], "", ""
    for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or []:
            if delta.id:
                names.append(delta.function.name)
            arguments += delta.function.arguments or ""
        content += chunk.choices[0].delta.content or ""
    assert names == ["get_weather"] and json.loads(arguments) == json.loads(call.function.arguments)
    assert not any(marker in content for marker in MARKUP)


def test_the_apply_template_route_shows_the_native_tool_section_and_results(agents_server: Server) -> None:
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}  # fmt: skip
    messages = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ]
    body = {"messages": messages, "tools": [WEATHER]}
    qwen = httpx.post(agents_server.url + "/apply-template", json={**body, "model": "qwen"}, timeout=30)
    prompt = qwen.json()["prompt"]
    assert "<tools>" in prompt and '"name": "get_weather"' in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert "<tool_response>\nsunny, 21 C\n</tool_response>" in prompt
    llama = httpx.post(agents_server.url + "/apply-template", json={**body, "model": "llama"}, timeout=30)
    prompt = llama.json()["prompt"]
    assert '{"name": "get_weather", "parameters": {"city": "Paris"}}' in prompt
    assert "<|start_header_id|>ipython<|end_header_id|>" in prompt


def test_an_openai_tool_loop_completes(client: openai.OpenAI) -> None:
    first = client.chat.completions.create(**_forced("qwen"))
    call = (first.choices[0].message.tool_calls or [])[0]
    messages = [
        *ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 degrees."},
    ]
    answer = client.chat.completions.create(
        model="qwen", messages=messages, tools=[WEATHER], tool_choice="none", max_tokens=30, temperature=0
    )
    assert answer.choices[0].message.content and not answer.choices[0].message.tool_calls


def test_the_lazy_grammar_completes_a_call_once_its_trigger_appears(
    agents_server: Server, client: openai.OpenAI
) -> None:
    # Llama 3's call opens with a bare `{`: biased up, the model starts one, the grammar wakes
    # and the call completes as valid JSON for the declared parameters.
    (brace,) = httpx.post(agents_server.url + "/tokenize", json={"content": "{"}, timeout=30).json()["tokens"]
    request = {**_forced("llama"), "tool_choice": "auto", "logit_bias": {str(brace): 100}}
    answer = client.chat.completions.create(**request)
    (call,) = answer.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)


def test_the_anthropic_sdk_round_trip_with_tool_use_and_tool_result(
    agents_server: Server, request: pytest.FixtureRequest
) -> None:
    sdk = anthropic.Anthropic(base_url=agents_server.url, api_key="unused", max_retries=0)
    request.addfinalizer(sdk.close)  # left to the garbage collector, its socket may warn in a later test
    tool = {
        "name": "get_weather",
        "description": "The weather",
        "input_schema": WEATHER["function"]["parameters"],
    }
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    message = sdk.messages.create(
        model="qwen",
        max_tokens=60,
        messages=ask,
        tools=[tool],
        tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
    )
    (use,) = [block for block in message.content if block.type == "tool_use"]
    assert message.stop_reason == "tool_use" and set(use.input) == {"city"}
    with sdk.messages.stream(
        model="qwen",
        max_tokens=60,
        messages=ask,
        tools=[tool],
        tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
    ) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content] == ["tool_use"] and set(streamed.content[0].input) == {"city"}
    result = [
        *ask,
        {"role": "assistant", "content": [use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny."}]},
    ]
    final = sdk.messages.create(model="qwen", max_tokens=30, messages=result, tools=[tool])
    assert final.content and final.stop_reason in ("end_turn", "max_tokens", "tool_use")


def test_responses_return_the_call_as_a_function_call_item(client: openai.OpenAI) -> None:
    tool = {"type": "function", **WEATHER["function"]}
    response = client.responses.create(
        model="llama", input="What is the weather in Paris?", tools=[tool], tool_choice="required",
        parallel_tool_calls=False, max_output_tokens=60, temperature=0,
    )  # fmt: skip
    (item,) = [item for item in response.output if item.type == "function_call"]
    assert item.name == "get_weather" and "city" in json.loads(item.arguments)
    events = list(
        client.responses.create(
            model="llama", input="What is the weather in Paris?", tools=[tool], tool_choice="required",
            parallel_tool_calls=False, max_output_tokens=60, temperature=0, stream=True,
        )
    )  # fmt: skip
    pieces = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert done and json.loads(pieces) == json.loads(done[0].arguments)


@pytest.fixture(scope="module")
def thinking_server() -> Iterator[Server]:
    """The default model with DeepSeek R1's template, whose prompt ends inside <think>."""
    template = (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text()
    models = [{"id": "r1", "path": default_model_path(), "n_ctx": 2048, "chat_template": template}]
    with serving_models(models, LLM_REASONING_BUDGET="8") as server:
        yield server


def test_a_thinking_budget_ends_the_thinking_and_the_answer_follows(
    thinking_server: Server, request: pytest.FixtureRequest
) -> None:
    with openai_client(thinking_server) as sdk:
        ask = {
            "model": "r1",
            "messages": ASK,
            "max_tokens": 40,
            "temperature": 0,
            "extra_body": {"ignore_eos": True, "reasoning_budget": -1},
        }
        unbounded = sdk.chat.completions.create(**ask).choices[0].message
        # The model never closes its thinking by itself: all of its answer is reasoning.
        assert getattr(unbounded, "reasoning_content", None) and not unbounded.content
        bounded = (
            sdk.chat.completions.create(**{**ask, "extra_body": {"ignore_eos": True, "reasoning_budget": 8}})
            .choices[0]
            .message
        )
        by_default = sdk.chat.completions.create(**{**ask, "extra_body": {"ignore_eos": True}}).choices[0]
    # LLM_REASONING_BUDGET=8 bounds a request that names no budget, as the explicit 8 does.
    assert by_default.message.content == bounded.content
    assert bounded.content and getattr(bounded, "reasoning_content", None)
    assert len(bounded.reasoning_content) < len(unbounded.reasoning_content)
    assert "</think>" not in bounded.content + bounded.reasoning_content
    sdk_anthropic = anthropic.Anthropic(base_url=thinking_server.url, api_key="unused", max_retries=0)
    request.addfinalizer(sdk_anthropic.close)
    message = sdk_anthropic.messages.create(
        model="r1", max_tokens=40, messages=ASK, thinking={"type": "enabled", "budget_tokens": 8},
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    assert [block.type for block in message.content] == ["thinking", "text"]
    with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):
        sdk_anthropic.messages.create(
            model="r1", max_tokens=8, messages=ASK, thinking={"type": "enabled", "budget_tokens": 8}
        )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_openai_agents_sdk_loop_calls_the_tool_and_answers(agents_server: Server, api: str) -> None:
    import agents  # the openai Agents SDK, as an agent framework drives a local server

    agents.set_tracing_disabled(True)  # its traces would go to OpenAI's servers
    calls: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"Sunny and 21 degrees in {city}."

    client = openai.AsyncOpenAI(base_url=agents_server.url + "/v1", api_key="unused", max_retries=0)
    model_class = agents.OpenAIChatCompletionsModel if api == "chat" else agents.OpenAIResponsesModel
    agent = agents.Agent(
        name="weather",
        instructions="Answer questions about the weather.",
        tools=[get_weather],
        model=model_class(model="qwen", openai_client=client),
        # The first turn must call (a 135M model would not by itself); the SDK then resets
        # tool_choice to auto, so the next turn answers with the tool's result in view.
        model_settings=agents.ModelSettings(
            tool_choice="required", parallel_tool_calls=False, temperature=0, max_tokens=400
        ),
    )

    async def run() -> Any:
        async with client:  # closed inside the loop, so its connections end with it
            return await agents.Runner.run(agent, "What is the weather in Paris?", max_turns=4)

    result = asyncio.run(run())
    assert len(calls) == 1 and calls[0]
    assert isinstance(result.final_output, str) and result.final_output.strip()
