"""The continuation decision and the continued prompt, as pure functions."""

from __future__ import annotations

import pytest

from app.api.http.errors import InvalidRequestError
from app.api.prompting.prefill import continuation, continued_text
from app.api.requests.chat import ChatRequest

ASK = {"role": "user", "content": "Hi"}
STARTED = {"role": "assistant", "content": "Hello", "reasoning_content": "greet"}


def test_a_trailing_assistant_message_is_continued_unless_the_setting_is_off() -> None:
    chat = ChatRequest(messages=[ASK, STARTED])
    on = continuation(chat, prefill_assistant=True)
    assert (on.messages, on.continued, on.generation_prompt) == ([ASK], STARTED, True)
    off = continuation(chat, prefill_assistant=False)
    assert (off.messages, off.continued, off.generation_prompt) == ([ASK, STARTED], None, True)
    # Explicitly asked, it continues whatever the setting.
    asked = ChatRequest(messages=[ASK, STARTED], continue_final_message=True, add_generation_prompt=False)
    assert continuation(asked, prefill_assistant=False).continued == STARTED
    # No generation prompt asked: the messages as they are, the turn left closed.
    closed = continuation(ChatRequest(messages=[ASK], add_generation_prompt=False), prefill_assistant=True)
    assert (closed.continued, closed.generation_prompt) == (None, False)
    assert continuation(ChatRequest(messages=[ASK]), prefill_assistant=True).continued is None


@pytest.mark.parametrize(
    "chat",
    [
        ChatRequest(messages=[ASK, STARTED], continue_final_message=True),
        ChatRequest(messages=[ASK], continue_final_message=True, add_generation_prompt=False),
        ChatRequest(messages=[ASK, STARTED, STARTED]),
        ChatRequest(messages=[ASK, {**STARTED, "tool_calls": [{"id": "c"}]}]),
    ],
)
def test_a_continuation_that_cannot_be_is_refused(chat: ChatRequest) -> None:
    with pytest.raises(InvalidRequestError):
        continuation(chat, prefill_assistant=True)


def test_the_content_follows_the_generation_prompt_with_an_opened_thinking_closed_first() -> None:
    assert continued_text("<s>assistant\n", STARTED, None) == "<s>assistant\nHello"
    tags = ("<think>", "</think>")
    opened = continued_text("<s>assistant\n<think>\n", STARTED, tags)
    assert opened == "<s>assistant\n<think>greet</think>Hello"
    assert continued_text("<s>assistant\n", STARTED, tags) == "<s>assistant\nHello"  # not opened: as is
