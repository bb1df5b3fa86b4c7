"""Every family's body becomes the same typed chat request; the sampling fields are the engine's, once."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from app.api.anthropic.schemas import messages_request_schema
from app.api.chat.schemas import chat_completion_schema
from app.api.http.generation_schema import GenerationSchema
from app.api.llama.schemas import llama_completion_schema
from app.api.ollama.schemas import chat_schema
from app.api.requests.chat import ChatRequest
from app.api.requests.generation import SAMPLING_FIELDS, sampling_of
from app.api.responses import conversion as responses
from app.api.responses.schemas import response_request_schema
from app.engine.types import Sampling
from tests.unit.conftest import MODEL_ID

WEATHER = {"name": "weather", "description": "Weather in a city.", "parameters": {"type": "object"}}
OPENAI_TOOL = {"type": "function", "function": WEATHER}


def test_every_sampling_field_of_the_engine_is_a_validated_request_field() -> None:
    # The engine's Sampling declares them; the schema gives each its bounds; nothing lists them again.
    assert set(SAMPLING_FIELDS) <= set(GenerationSchema().fields)
    assert sampling_of({"temperature": 0, "samplers": ["top-k"], "n": 3}) == Sampling(
        temperature=0, samplers=("top-k",)
    )


def _chat(**body: Any) -> ChatRequest:
    typed = chat_completion_schema.load(
        {"messages": [{"role": "user", "content": "Weather in Oslo?"}], **body}
    )
    assert isinstance(typed, ChatRequest)
    return typed


def test_chat_completions_load_as_a_typed_request() -> None:
    chat = _chat(max_completion_tokens=7, max_tokens=3, temperature=0.2, stop="END", tools=[OPENAI_TOOL])
    assert (chat.max_tokens, chat.max_param) == (7, "max_completion_tokens")  # OpenAI's newer name wins
    assert chat.sampling.temperature == 0.2 and chat.stop == ("END",)
    assert chat.tools_active and not chat.tools_forced and chat.parallel_calls


@pytest.mark.parametrize(
    ("family", "converted"),
    [
        (
            "anthropic",
            lambda: (
                messages_request_schema.load(
                    {
                        "model": MODEL_ID,
                        "max_tokens": 9,
                        "temperature": 0.2,
                        "stop_sequences": ["END"],
                        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
                        "tools": [{**{k: v for k, v in WEATHER.items() if k != "parameters"},
                                   "input_schema": WEATHER["parameters"]}],
                        "tool_choice": {"type": "any"},
                    }
                ).chat
            ),
        ),
        (
            "ollama",
            lambda: chat_schema.load(
                    {
                        "model": MODEL_ID,
                        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
                        "options": {"temperature": 0.2, "num_predict": 9, "stop": ["END"]},
                        "tools": [OPENAI_TOOL],
                        "stream": False,
                    }
                ).chat,
        ),
        (
            "responses",
            lambda: responses.as_chat(
                response_request_schema.load(
                    {
                        "model": MODEL_ID,
                        "input": "Weather in Oslo?",
                        "max_output_tokens": 9,
                        "temperature": 0.2,
                        "tools": [{"type": "function", **WEATHER}],
                        "tool_choice": "required",
                    }
                )
            ),
        ),
    ],
)  # fmt: skip
def test_each_family_converts_to_the_chat_request(app: Flask, family: str, converted: Any) -> None:
    with app.app_context():  # Ollama's schema resolves the model's name
        chat = converted()
    assert isinstance(chat, ChatRequest), family
    assert chat.messages[-1] == {"role": "user", "content": "Weather in Oslo?"}
    assert chat.max_tokens == 9 and chat.sampling.temperature == 0.2
    assert chat.tools == [OPENAI_TOOL] and chat.tools_active
    assert chat.tools_forced is (family != "ollama")  # Ollama's tools are always `auto`
    if family != "responses":  # the Responses API has no stop sequences
        assert chat.stop == ("END",)
    assert chat.max_param == ("max_output_tokens" if family == "responses" else "max_tokens")


def test_llama_servers_n_predict_wins_and_minus_one_means_the_context() -> None:
    asked = llama_completion_schema.load({"prompt": "Hi", "n_predict": 5, "max_tokens": 2, "n": 3})
    assert (asked.max_tokens, asked.max_param, asked.n) == (5, "n_predict", 3)  # n: n_cmpl's alias
    assert llama_completion_schema.load({"prompt": "Hi", "n_cmpl": 2, "n": 3}).n == 2  # n_cmpl wins
    assert llama_completion_schema.load({"prompt": "Hi"}).n == 1
    up_to_context = llama_completion_schema.load({"prompt": "Hi", "n_predict": -1, "max_tokens": 2})
    assert up_to_context.max_tokens is None
