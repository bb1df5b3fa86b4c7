"""System turns anywhere, placed where a template that takes one leading system message can read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.api.prompting.system_turns import placed
from app.chat_formats.profile import profile

TEMPLATES = Path(__file__).parents[3] / "data" / "templates"
CLAUDE_CODE = [  # Claude Code's first request: the user's words, then the environment as a system turn
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Say hello."},
    {"role": "system", "content": "# Environment\ncwd: /work"},
]
CODEX = [  # Codex's: two developer messages, then the user's
    {"role": "developer", "content": "You are Codex."},
    {"role": "developer", "content": "Skills: none."},
    {"role": "user", "content": "Say hello."},
]


def test_a_template_that_takes_them_gets_them_unchanged() -> None:
    assert placed(CLAUDE_CODE, late_system=True) is CLAUDE_CODE
    assert placed([CLAUDE_CODE[0], CLAUDE_CODE[1]], late_system=False) == CLAUDE_CODE[:2]


def test_a_late_one_joins_the_user_message_before_it_and_leading_ones_become_one() -> None:
    assert placed(CLAUDE_CODE, late_system=False) == [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Say hello.\n\n# Environment\ncwd: /work"},
    ]
    assert placed(CODEX, late_system=False) == [
        {"role": "developer", "content": "You are Codex.\n\nSkills: none."},
        {"role": "user", "content": "Say hello."},
    ]


def test_after_the_assistant_it_waits_for_the_next_user_message_or_ends_the_conversation() -> None:
    turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "system", "content": "note"},
        {"role": "user", "content": "c"},
    ]
    assert placed(turns, late_system=False)[2:] == [{"role": "user", "content": "note\n\nc"}]
    last = [*turns[:3]]
    assert placed(last, late_system=False)[-1] == {"role": "user", "content": "note"}
    calls: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "r"},
        {"role": "system", "content": "note"},
        {"role": "user", "content": "c"},
    ]
    assert [m["role"] for m in placed(calls, late_system=False)] == ["user", "assistant", "tool", "user"]


@pytest.mark.parametrize(
    "name",
    [
        "mistralai-Mistral-Nemo-Instruct-2407",
        "deepseek-ai-DeepSeek-V3.1",
        "HuggingFaceTB-SmolLM3-3B",
        "Qwen-Qwen2.5-7B-Instruct",
        "meta-llama-Llama-3.1-8B-Instruct",
    ],
)
def test_every_real_template_renders_an_agents_conversation_with_every_instruction(name: str) -> None:
    source = (TEMPLATES / f"{name}.jinja").read_text()
    formatter = Jinja2ChatFormatter(template=source, eos_token="</s>", bos_token="<s>")

    def render(messages: Any, tools: Any, variables: dict) -> str:
        # As the tokenizer hands them over: `developer` is OpenAI's new name for `system`.
        messages = [{**m, "role": "system" if m["role"] == "developer" else m["role"]} for m in messages]
        return formatter(messages=messages, tools=tools, **variables).prompt

    late = profile(source, render).supports_late_system
    for conversation in (CLAUDE_CODE, CODEX):
        text = render(placed(conversation, late), None, {})  # raises if the template refuses them
        for message in conversation:
            assert message["content"] in text, (name, message)


def test_the_probe_tells_templates_that_refuse_or_drop_them() -> None:
    def shapes(name: str) -> bool:
        source = (TEMPLATES / f"{name}.jinja").read_text()
        formatter = Jinja2ChatFormatter(template=source, eos_token="</s>", bos_token="<s>")

        def render(messages: Any, tools: Any, variables: dict) -> str:
            return formatter(messages=messages, tools=tools, **variables).prompt

        return profile(source, render).supports_late_system

    assert shapes("Qwen-Qwen2.5-7B-Instruct") and shapes("meta-llama-Llama-3.1-8B-Instruct")
    assert not shapes("mistralai-Mistral-Nemo-Instruct-2407")  # roles must alternate
    assert not shapes("deepseek-ai-DeepSeek-V3.1")  # keeps only the system messages' text, up front
