"""cache_control breakpoints: the last one found, the marker put after its block, the tokens it covers."""

from __future__ import annotations

from typing import Any

from app.api.anthropic import cache_marks
from app.api.anthropic.cache_marks import MARK

CACHED = {"type": "ephemeral"}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}], **fields}


def test_the_last_breakpoint_in_anthropics_order_tools_system_messages() -> None:
    tool = {"name": "t", "input_schema": {}, "cache_control": CACHED}
    system = [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": CACHED}]
    assert cache_marks.last_breakpoint(body()) is None
    assert cache_marks.last_breakpoint(body(tools=[tool])) == ("tools", 0)
    assert cache_marks.last_breakpoint(body(tools=[tool], system=system)) == ("system", 1)
    marked_message = {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": CACHED}]}
    asked = body(system=system, messages=[{"role": "user", "content": "x"}, marked_message])
    assert cache_marks.last_breakpoint(asked) == ("messages", 1, 0)


def test_the_marker_follows_the_marked_block_whatever_its_kind() -> None:
    tool = {"name": "t", "description": "d", "input_schema": {}, "cache_control": CACHED}
    assert cache_marks.with_mark(body(tools=[tool]), ("tools", 0))["tools"][0]["description"] == "d" + MARK
    result = {"type": "tool_result", "tool_use_id": "1", "content": "sunny", "cache_control": CACHED}
    image = {"type": "image", "source": {"type": "base64", "data": ""}, "cache_control": CACHED}
    asked = body(messages=[{"role": "user", "content": [result, image]}])
    assert (
        cache_marks.with_mark(asked, ("messages", 0, 0))["messages"][0]["content"][0]["content"]
        == "sunny" + MARK
    )
    after_image = cache_marks.with_mark(asked, ("messages", 0, 1))["messages"][0]["content"]
    assert after_image[2] == {"type": "text", "text": MARK} and len(asked["messages"][0]["content"]) == 2


def test_covered_tokens_are_the_prompt_up_to_the_marker() -> None:
    system = [{"type": "text", "text": "abc", "cache_control": CACHED}]
    asked = body(system=system)

    def render(marked: dict[str, Any]) -> str:  # a template: the system text, then the question
        return "<s>" + marked["system"][0]["text"] + "<u>hi"

    def tokenize(text: str) -> list[int]:  # a token per character
        return [ord(c) for c in text]

    prompt = tokenize("<s>abc<u>hi")
    assert cache_marks.covered_tokens(asked, prompt, render, tokenize) == len("<s>abc")
    assert cache_marks.covered_tokens(body(), prompt, render, tokenize) == 0
    assert cache_marks.covered_tokens(asked, prompt, lambda _: "<s>abc<u>hi", tokenize) == 0  # dropped
