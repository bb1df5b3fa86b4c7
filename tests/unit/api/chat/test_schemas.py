"""Request validation: OpenAI's types and bounds, nulls as defaults, unknown fields ignored."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import ValidationError

from app.api.chat.schemas import chat_completion_schema, completion_schema
from app.api.http.errors import from_validation
from app.engine.types import Sampling

USER = [{"role": "user", "content": "hi"}]


def param_of(schema: Any, body: dict[str, Any]) -> str | None:
    with pytest.raises(ValidationError) as caught:
        schema.load(body)
    return from_validation(caught.value).param


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", 2.01),
        ("temperature", "hot"),
        ("top_p", 0),
        ("top_p", 1.5),
        ("top_k", -1),
        ("top_k", 1.5),
        ("min_p", 1.1),
        ("presence_penalty", 2.5),
        ("frequency_penalty", -3),
        ("repeat_penalty", -1),
        ("max_tokens", 0),
        ("max_tokens", "10"),
        ("max_completion_tokens", -5),
        ("seed", 1.5),
        ("stream", "maybe"),
        ("stream", "true"),
        ("stream", 1),
        ("temperature", "0.5"),
        ("temperature", True),
        ("max_tokens", True),
        ("seed", "7"),
        ("stream_options", "yes"),
        ("n", 200),
        ("n", 0),
        ("stop", ["a", "b", "c", "d", "e"]),
        ("stop", 5),
        ("stop", [1]),
        ("model", 5),
        ("user", 5),
        ("logprobs", 1),
        ("top_logprobs", 3),
        ("logit_bias", {"1": 500}),
        ("logit_bias", [1]),
        ("tools", [{"type": "function"}]),
        ("response_format", {"type": "xml"}),
        ("response_format", {"type": "json_schema"}),
        ("tool_choice", "sometimes"),
        ("tool_choice", {"type": "function", "function": {"name": "absent"}}),
        ("tool_choice", "required"),
        ("parallel_tool_calls", "yes"),
        # llama-server's sampling fields
        ("typical_p", 1.5),
        ("min_keep", -1),
        ("top_n_sigma", -2),
        ("xtc_probability", 1.1),
        ("xtc_threshold", "0.1"),
        ("dynatemp_range", -0.5),
        ("dynatemp_exponent", -1),
        ("dry_multiplier", -1),
        ("dry_base", 0.5),
        ("dry_allowed_length", 1.5),
        ("dry_penalty_last_n", -2),
        ("dry_penalty_last_n", 1 << 30),
        ("repeat_last_n", 1 << 30),
        ("min_keep", 5000),
        ("dry_sequence_breakers", "\n"),
        ("dry_sequence_breakers", [""]),
        ("dry_sequence_breakers", [1]),
        ("mirostat", 3),
        ("mirostat", True),
        ("mirostat_tau", -1),
        ("mirostat_eta", 2),
        ("repeat_last_n", -2),
        ("penalize_nl", "no"),
        ("samplers", ["top_k", "beam"]),
        ("samplers", "k" * 17),
        ("samplers", {"top_k": 1}),
    ],
)
def test_bad_field_is_named(field: str, value: Any) -> None:
    param = param_of(chat_completion_schema, {"messages": USER, field: value}) or ""
    assert param == field or param.startswith((field + ".", field + "[")), param


def test_samplers_are_names_or_llama_servers_letters() -> None:
    as_letters = chat_completion_schema.load({"messages": USER, "samplers": "edkypmxti?"})
    assert as_letters.sampling.samplers == (
        "penalties", "dry", "top_k", "typical_p", "top_p", "min_p", "xtc", "temperature", "infill",
    )  # fmt: skip
    named = chat_completion_schema.load({"messages": USER, "samplers": ["top_k", "top_p", "infill"]})
    assert named.sampling.samplers == ("top_k", "top_p", "infill")
    unhashables: tuple[object, ...] = ({}, [], 7)
    for unhashable in unhashables:  # found by the API fuzzer: once a TypeError, a 500
        with pytest.raises(ValidationError, match="is not a sampler"):
            chat_completion_schema.load({"messages": USER, "samplers": ["top_k", unhashable]})


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([], "messages"),
        ("hi", "messages"),
        ([{"content": "hi"}], "messages[0].role"),
        ([{"role": "robot", "content": "hi"}], "messages[0].role"),
        ([{"role": "user"}], "messages[0].content"),
        ([{"role": "user", "content": None}], "messages[0].content"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([USER[0], {"role": "user", "content": [{"type": "video"}]}], "messages[1].content[0].type"),
        ([USER[0], {"role": "user", "content": [{"type": "image_url"}]}], "messages[1].content[0].image_url"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}],
            "messages[0].content[0].image_url",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages[0].content[0].text"),
        (["hi"], "messages[0]"),
    ],
)
def test_bad_messages_are_named(messages: Any, param: str) -> None:
    assert param_of(chat_completion_schema, {"messages": messages}) == param


def test_missing_messages_and_prompt() -> None:
    assert param_of(chat_completion_schema, {}) == "messages"
    assert param_of(completion_schema, {}) == "prompt"
    assert param_of(completion_schema, {"prompt": []}) == "prompt"
    assert param_of(completion_schema, {"prompt": ["a", 1]}) == "prompt"
    assert param_of(completion_schema, {"prompt": "a", "echo": "loud"}) == "echo"
    assert param_of(completion_schema, {"prompt": "a", "logprobs": 6}) == "logprobs"
    assert param_of(completion_schema, {"prompt": "a", "best_of": 3}) == "best_of"


def test_nulls_mean_default_and_unknown_fields_are_ignored() -> None:
    nulls = {
        k: None
        for k in (
            "temperature",
            "top_p",
            "max_tokens",
            "stop",
            "seed",
            "n",
            "stream",
            "stream_options",
            "logprobs",
            "tools",
            "response_format",
            "user",
        )
    }
    data = chat_completion_schema.load(
        {"messages": USER, "store": True, "metadata": {"a": 1}, "parallel_tool_calls": False, **nulls}
    )
    assert not hasattr(data, "store") and data.sampling == Sampling()  # nulls: llama.cpp's defaults


def test_content_parts_and_stop_are_normalised() -> None:
    data = chat_completion_schema.load(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{}"}}],
                },
                {"role": "tool", "content": "4", "tool_call_id": "x", "extra": 1},
            ],
            "stop": "END",
            "n": 1,
            "response_format": {"type": "text"},
            "stream": True,
            "stream_options": {"include_usage": True, "unknown": 1},
        }
    )
    assert data.messages[0]["content"] == "ab"
    assert data.stop == ("END",)
    assert data.include_usage is True
    assert completion_schema.load({"prompt": "one"}).prompts == ["one"]
    assert completion_schema.load({"prompt": ["a", "b"]}).prompts == ["a", "b"]


def test_nested_option_is_named_with_its_path() -> None:
    body = {"messages": USER, "stream": True, "stream_options": {"include_usage": 1}}
    assert param_of(chat_completion_schema, body) == "stream_options.include_usage"


def test_llama_servers_sampling_fields_and_sampler_names_are_taken() -> None:
    samplers = ["dry", "top-k", "typ_p", "nucleus", "minp", "xtc", "temp"]
    body = {"messages": USER, "typical_p": 0.9, "mirostat": 2, "mirostat_tau": 3.0, "dry_multiplier": 0.8,
            "dry_sequence_breakers": ["\n", "."], "xtc_probability": 0.5, "top_n_sigma": 1.5,
            "samplers": samplers, "repeat_last_n": -1}  # fmt: skip
    loaded = chat_completion_schema.load(body)
    assert loaded.sampling.samplers == tuple(samplers) and loaded.sampling.mirostat == 2


@pytest.mark.parametrize("schema", [chat_completion_schema, completion_schema])
def test_stream_options_only_with_a_stream(schema: Any) -> None:
    # OpenAI: "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    body = {"messages": USER, "prompt": "hi", "stream_options": {"include_usage": True}}
    for unstreamed in ({}, {"stream": False}, {"stream": None}):
        assert param_of(schema, {**body, **unstreamed}) == "stream_options"
    schema.load({**body, "stream": True})
    schema.load({**body, "stream_options": None})


@pytest.mark.parametrize("choice", ["auto", "required", {"type": "function", "function": {"name": "f"}}])
def test_a_tool_choice_needs_tools(choice: Any) -> None:
    assert param_of(chat_completion_schema, {"messages": USER, "tool_choice": choice}) == "tool_choice"
    assert (
        param_of(chat_completion_schema, {"messages": USER, "tools": [], "tool_choice": choice})
        == "tool_choice"
    )


def test_tool_choice_none_without_tools_is_taken() -> None:
    # As vLLM: it asks for what happens anyway, and some clients send it with every request.
    chat_completion_schema.load({"messages": USER, "tool_choice": "none"})
