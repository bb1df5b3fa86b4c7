"""cache_control breakpoints: the last one found, the marker put after its block, the tokens it covers."""

from __future__ import annotations

from typing import Any

from app.api.anthropic import pins
from app.api.anthropic.pins import MARK

CACHED = {"type": "ephemeral"}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}], **fields}


def test_the_last_breakpoint_in_anthropics_order_tools_system_messages() -> None:
    tool = {"name": "t", "input_schema": {}, "cache_control": CACHED}
    system = [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": CACHED}]
    assert pins.last_breakpoint(body()) is None
    assert pins.last_breakpoint(body(tools=[tool])) == ("tools", 0)
    assert pins.last_breakpoint(body(tools=[tool], system=system)) == ("system", 1)
    marked_message = {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": CACHED}]}
    asked = body(system=system, messages=[{"role": "user", "content": "x"}, marked_message])
    assert pins.last_breakpoint(asked) == ("messages", 1, 0)


def test_the_marker_follows_the_marked_block_whatever_its_kind() -> None:
    tool = {"name": "t", "description": "d", "input_schema": {}, "cache_control": CACHED}
    assert pins.with_mark(body(tools=[tool]), ("tools", 0))["tools"][0]["description"] == "d" + MARK
    result = {"type": "tool_result", "tool_use_id": "1", "content": "sunny", "cache_control": CACHED}
    image = {"type": "image", "source": {"type": "base64", "data": ""}, "cache_control": CACHED}
    asked = body(messages=[{"role": "user", "content": [result, image]}])
    assert pins.with_mark(asked, ("messages", 0, 0))["messages"][0]["content"][0]["content"] == "sunny" + MARK
    after_image = pins.with_mark(asked, ("messages", 0, 1))["messages"][0]["content"]
    assert after_image[2] == {"type": "text", "text": MARK} and len(asked["messages"][0]["content"]) == 2


def test_pinned_tokens_are_the_prompt_up_to_the_marker() -> None:
    system = [{"type": "text", "text": "abc", "cache_control": CACHED}]
    marked = pins.marked_body(body(system=system))
    assert marked is not None and marked["system"][0]["text"] == "abc" + MARK
    assert pins.marked_body(body()) is None

    def tokenize(text: str) -> list[int]:  # a token per character
        return [ord(c) for c in text]

    prompt = tokenize("<s>abc<u>hi")
    # The marked request's text, as a template renders it: the system text, then the question.
    assert pins.pinned_tokens("<s>abc" + MARK + "<u>hi", prompt, tokenize) == len("<s>abc")
    assert pins.pinned_tokens("<s>abc<u>hi", prompt, tokenize) == 0  # the template dropped it
