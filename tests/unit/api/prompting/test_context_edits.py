"""Anthropic's context edits on chat messages: older thinking dropped, older tool results cleared."""

from __future__ import annotations

from app.api.prompting.context_edits import PLACEHOLDER, applied
from app.api.requests.chat import ChatRequest, ClearThinking, ClearToolUses


def _call(n: int, name: str = "Read") -> list[dict]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": f'{{"n": {n}}}'}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": f"think {n}"},
        {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n} " * 10},
    ]


def _chat(*edits: object, calls: int = 5, names: tuple[str, ...] = ()) -> ChatRequest:
    messages = [{"role": "user", "content": "go"}]
    for n in range(calls):
        messages += _call(n, names[n] if n < len(names) else "Read")
    return ChatRequest(messages=messages, context_edits=tuple(edits))  # type: ignore[arg-type]


def words(text: str) -> int:
    return len(text.split())


def test_thinking_is_kept_in_the_last_turns_asked_or_all() -> None:
    chat, done = applied(_chat(ClearThinking(keep_turns=2)), words, lambda c: 0)
    thinking = [m.get("reasoning_content") for m in chat.messages if m["role"] == "assistant"]
    assert thinking == [None, None, None, "think 3", "think 4"]
    assert (done[0].cleared, done[0].tokens) == (3, 6)
    assert applied(_chat(ClearThinking(keep_turns=None)), words, lambda c: 0)[1] == []


def test_tool_results_are_cleared_once_the_prompt_passes_the_trigger_but_the_last_kept() -> None:
    edit = ClearToolUses(trigger_tokens=1000, keep_uses=2)
    unchanged, none = applied(_chat(edit), words, lambda c: 999)
    assert none == [] and unchanged.messages == _chat(edit).messages
    chat, done = applied(_chat(edit), words, lambda c: 1001)
    results = [m["content"] for m in chat.messages if m["role"] == "tool"]
    assert results[:3] == [PLACEHOLDER] * 3 and results[3].startswith("result 3")
    assert (done[0].cleared, done[0].tokens) == (3, 60)
    assert all(c["function"]["arguments"] != "{}" for m in chat.messages for c in m.get("tool_calls") or [])


def test_a_trigger_by_calls_excluded_tools_inputs_and_a_floor() -> None:
    edit = ClearToolUses(
        trigger_tokens=None,
        trigger_uses=3,
        keep_uses=1,
        exclude=frozenset({"Bash"}),
        clear_inputs=frozenset({"Read"}),
    )
    chat, done = applied(_chat(edit, names=("Bash", "Read", "Read", "Read", "Read")), words, lambda c: 0)
    results = [m["content"] for m in chat.messages if m["role"] == "tool"]
    assert results[0].startswith("result 0") and results[1:4] == [PLACEHOLDER] * 3  # Bash's stays
    inputs = [c["function"]["arguments"] for m in chat.messages for c in m.get("tool_calls") or []]
    assert inputs == ['{"n": 0}', "{}", "{}", "{}", '{"n": 4}']
    floor = ClearToolUses(trigger_tokens=None, trigger_uses=3, keep_uses=1, clear_at_least=10_000)
    assert applied(_chat(floor), words, lambda c: 0)[1] == []  # it would not clear enough: nothing
    assert applied(_chat(edit, calls=3), words, lambda c: 0)[1] == []  # not past the trigger
