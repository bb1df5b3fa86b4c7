"""Each real format: detected from its template, rendered with tools, answers parsed whole and growing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.chat_formats.answer import AnswerReader, DeltaStream
from app.chat_formats.base import Function
from app.chat_formats.detect import by_name, detect
from app.chat_formats.profile import profile

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
WEATHER = Function(
    "get_weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
)
ADD = Function("add", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})

# (template, format, an answer in its syntax with text, two calls), after the expected parses in
# llama.cpp's tests/test-chat.cpp.
CASES = [
    (
        "Qwen-Qwen2.5-7B-Instruct",
        "Hermes 2 Pro",
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
    ),
    (
        "meta-llama-Llama-3.1-8B-Instruct",
        "Llama 3.x",
        '{"name": "get_weather", "parameters": {"city": "Oslo"}}; '
        '{"name": "add", "parameters": {"a": 1, "b": 2}}',
    ),
    (
        "mistralai-Mistral-Nemo-Instruct-2407",
        "Mistral Nemo",
        'Let me look.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "abcDEF123"}, '
        '{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "xyz789XYZ"}]',
    ),
    (
        "unsloth-mistral-Devstral-Small-2507",
        "Magistral",
        'Let me look.[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}',
    ),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        "DeepSeek R1",
        "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "Oslo"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n'
        '{"a": 1, "b": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ),
    (
        "deepseek-ai-DeepSeek-V3.1",
        "DeepSeek V3.1",
        "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Oslo"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{"a": 1, "b": 2}'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ),
    (
        "meetkai-functionary-medium-v3.2",
        "Functionary v3.2",
        'all\nLet me look.>>>get_weather\n{"city": "Oslo"}>>>add\n{"a": 1, "b": 2}',
    ),
    (
        "ibm-granite-granite-3.3-2B-Instruct",
        "Granite",
        'Let me look.<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, '
        '{"name": "add", "arguments": {"a": 1, "b": 2}}]',
    ),
    (
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
        "Command R7B",
        '<|START_RESPONSE|>Let me look.<|END_RESPONSE|><|START_ACTION|>[\n    {"tool_call_id": "0", '
        '"tool_name": '
        '"get_weather", "parameters": {"city": "Oslo"}},\n    {"tool_call_id": "1", "tool_name": "add", '
        '"parameters": {"a": 1, "b": 2}}\n]<|END_ACTION|>',
    ),
    (
        "Qwen3-Coder",
        "Qwen3-Coder XML",
        "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "</function>\n"
        "</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n"
        "</parameter>\n</function>\n</tool_call>",
    ),
    (
        "openai-gpt-oss-120b",
        "GPT-OSS",
        "<|channel|>analysis<|message|>The user wants weather.<|end|><|start|>assistant<|channel|>commentary"
        "<|message|>Let me look.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
        '<|constrain|>json<|message|>{"city": "Oslo"}<|call|><|start|>assistant<|channel|>commentary '
        'to=functions.add <|constrain|>json<|message|>{"a": 1, "b": 2}<|call|>',
    ),
]
EXPECTED = [("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2})]


def _template(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text()


@pytest.mark.parametrize(("template", "fmt", "answer"), CASES, ids=[c[1] for c in CASES])
def test_the_template_says_its_format_and_whole_answers_parse_into_calls(
    template: str, fmt: str, answer: str
) -> None:
    assert detect(_template(template)).name == fmt
    parsed = AnswerReader(by_name(fmt), (WEATHER, ADD)).read(answer, partial=False)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == EXPECTED
    assert parsed.content.strip() == "Let me look." or fmt == "Llama 3.x"
    for marker in ("<tool_call>", "[TOOL_CALLS]", "<|", "｜", ">>>", "[ARGS]", "<function"):
        assert marker not in parsed.content


@pytest.mark.parametrize(("template", "fmt", "answer"), CASES, ids=[c[1] for c in CASES])
def test_a_growing_answer_streams_text_and_calls_that_add_up_to_the_whole(
    template: str, fmt: str, answer: str
) -> None:
    reader = AnswerReader(by_name(fmt), (WEATHER, ADD))
    stream = DeltaStream(reader)
    deltas = [d for end in range(1, len(answer) + 1) for d in stream.update(answer[:end], final=False)]
    deltas += stream.update(answer, final=True)
    whole = reader.read(answer, partial=False)
    content = "".join(d.text for d in deltas if d.kind == "content")
    assert content.strip() == whole.content.strip()
    for marker in ("<tool_call>", "[TOOL_CALLS]", "<|", "｜", ">>>", "<function"):
        assert marker not in content, marker
    opened = [d for d in deltas if d.kind == "call"]
    assert [d.name for d in opened] == ["get_weather", "add"] and len({d.id for d in opened}) == 2
    for index, (_, arguments) in enumerate(EXPECTED):
        pieces = "".join(d.text for d in deltas if d.kind == "arguments" and d.index == index)
        assert json.loads(pieces) == arguments


def test_parallel_tool_calls_false_keeps_the_first_call() -> None:
    fmt, answer = CASES[0][1], CASES[0][2]
    parsed = AnswerReader(by_name(fmt), (WEATHER, ADD), parallel=False).read(answer, partial=False)
    assert [c.name for c in parsed.calls] == ["get_weather"]


def test_a_call_cut_off_keeps_its_name_and_the_arguments_so_far() -> None:
    answer = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Os'
    parsed = AnswerReader(by_name("Hermes 2 Pro"), (WEATHER,)).read(answer, partial=False)
    (call,) = parsed.calls
    assert call.name == "get_weather" and not call.complete and call.arguments == '{"city": "Os'
    assert parsed.content == ""


def test_text_that_only_looks_like_a_marker_is_released_when_it_is_not() -> None:
    stream = DeltaStream(AnswerReader(by_name("Hermes 2 Pro"), (WEATHER,)))
    assert stream.update("a <tool", final=False)[0].text == "a "  # held: may be <tool_call>
    (delta,) = stream.update("a <tools are handy", final=False)
    assert delta.text == "<tools are handy"


@pytest.mark.parametrize(
    ("answer", "opened", "reasoning", "content"),
    [
        ("<think>\nThe user greets.\n</think>\n\nHello!", False, "The user greets.", "Hello!"),
        ("The user greets.\n</think>\n\nHello!", True, "The user greets.", "Hello!"),
        ("<think>\nStill thinking", False, "Still thinking", ""),
        ("Hello!", False, "", "Hello!"),
    ],
)
def test_reasoning_is_split_from_the_answer(answer: str, opened: bool, reasoning: str, content: str) -> None:
    reader = AnswerReader(by_name("Hermes 2 Pro"), thinking=True, opened=opened)
    parsed = reader.read(answer, partial=False)
    assert (parsed.reasoning, parsed.content) == (reasoning, content)
    stream = DeltaStream(reader)
    deltas = [d for end in range(1, len(answer) + 1) for d in stream.update(answer[:end], final=False)]
    deltas += stream.update(answer, final=True)
    assert "".join(d.text for d in deltas if d.kind == "reasoning").strip() == reasoning
    assert "".join(d.text for d in deltas if d.kind == "content") == content
    assert all("<think>" not in d.text and "</think>" not in d.text for d in deltas)


def test_a_call_inside_reasoning_is_not_a_call() -> None:
    answer = '<think>I could write <tool_call>{"name": "get_weather"}</tool_call></think>It is sunny.'
    parsed = AnswerReader(by_name("Hermes 2 Pro"), (WEATHER,), thinking=True).read(answer, partial=False)
    assert parsed.calls == [] and parsed.content == "It is sunny." and "<tool_call>" in parsed.reasoning


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        (
            "Qwen-Qwen2.5-7B-Instruct",
            [
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
                "<tool_response>\nsunny\n</tool_response>",
            ],
        ),
        (
            "meta-llama-Llama-3.1-8B-Instruct",
            [
                '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
                'ipython<|end_header_id|>\n\n"sunny"',
            ],
        ),
        (
            "mistralai-Mistral-Nemo-Instruct-2407",
            [
                '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "abcDEF123"}]',
                "[TOOL_RESULTS]",
            ],
        ),
        ("meetkai-functionary-medium-v3.2", ['>>>get_weather\n{"city": "Oslo"}', "sunny"]),
    ],
)
def test_templates_render_tools_calls_and_results_their_own_way(template: str, shown: list[str]) -> None:
    source = _template(template)
    formatter = Jinja2ChatFormatter(template=source, eos_token="</s>", bos_token="<s>")

    def render(messages: list, tools: list | None, variables: dict) -> str:
        return formatter(messages=messages, tools=tools, **variables).prompt

    shape = profile(source, render)
    arguments = {"city": "Oslo"} if shape.supports_object_arguments else json.dumps({"city": "Oslo"})
    call = {
        "id": "abcDEF123",
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER.parameters}}]
    prompt = render(
        [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather", "content": "sunny"},
        ],
        tools,
        {},
    )
    assert shape.supports_tools and "get_weather" in prompt.split("Weather in Oslo?")[0] + prompt
    for text in shown:
        assert text in prompt, text


def test_llama_3_calls_tagged_with_python_tag_parse_and_the_tag_never_shows() -> None:
    reader = AnswerReader(by_name("Llama 3.x"), (WEATHER,))
    answer = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}'
    parsed = reader.read(answer, partial=False)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [EXPECTED[0]]
    stream = DeltaStream(reader)
    deltas = [d for end in range(1, len(answer) + 1) for d in stream.update(answer[:end], final=False)]
    assert not [d for d in deltas if d.kind == "content"]
    assert any("python_tag" in pattern for pattern in by_name("Llama 3.x").trigger_patterns())


def test_functionary_wakes_its_grammar_only_on_a_declared_name_and_its_newline() -> None:
    import re

    patterns = by_name("Functionary v3.2").trigger_patterns((WEATHER, ADD))
    woken = [text for text in ("a", "all\nHi", "get_weath", "get_weather\n{", "all\nok>>>add\n")
             if any(re.fullmatch(p, text) for p in patterns)]  # fmt: skip
    assert woken == ["get_weather\n{", "all\nok>>>add\n"]


def test_functionary_code_for_python_is_one_argument_once_it_has_ended() -> None:
    reader = AnswerReader(by_name("Functionary v3.2"), (Function("python", {}),))
    growing = reader.read("python\nprint(1", partial=True)
    assert [(c.name, c.arguments) for c in growing.calls] == [("python", "")]
    (call,) = reader.read("python\nprint(1)", partial=False).calls
    assert json.loads(call.arguments) == {"code": "print(1)"}
