"""Which message of a conversation a prompt token falls in: for saying where a prompt left the cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.api.http.errors import APIError
from app.api.prompting.conversation import prompt, rendered
from app.api.requests.chat import ChatRequest
from app.engine.errors import EngineError
from app.engine.tokenizer import Tokenizer
from app.settings.config import Config


@dataclass(frozen=True)
class Place:
    """Where a prompt token falls: its message's index in the conversation and role."""

    message: int
    role: str


# What a view knows of its prompt: the message a token position of its tokens falls in (None if unknown).
Locate = Callable[[Sequence[int], int], Place | None]


def locator(tokenizer: Tokenizer, chat: ChatRequest, config: Config) -> Locate:
    """A function from a token position of `chat`'s prompt to the message it falls in, found by
    bisection over renderings of the first k messages (which only grow with k); asked only when
    a prompt left the cache, so its renderings cost nothing on a hit. The position is read as a
    place in the prompt's text off its tokens' pieces, so that each rendering is measured in bytes;
    tokenizing each instead (where the pieces do not spell the text) cost an agent's 12k-token turn
    half a second."""

    def shorter(count: int) -> ChatRequest:
        return replace(chat, messages=chat.messages[:count], add_generation_prompt=False,
                       continue_final_message=None)  # fmt: skip

    def text_up_to(count: int) -> int:
        return len(tokenizer.chat_text(rendered(tokenizer, shorter(count), config)).encode())

    def tokens_up_to(count: int) -> int:
        return len(prompt(tokenizer, shorter(count), config).tokens)

    def locate(tokens: Sequence[int], at: int) -> Place | None:
        try:
            offset = tokenizer.spelt_offset(rendered(tokenizer, chat, config), tokens, at)
            if offset is None:
                return first_past(chat.messages, tokens_up_to, at)
            return first_past(chat.messages, text_up_to, offset)
        except (EngineError, APIError, ValueError):  # a template that will not render a part of it
            return None

    return locate


def first_past(messages: list[dict[str, Any]], measure: Callable[[int], int], at: int) -> Place:
    """The message a place `at` falls in: the fewest messages whose prompt, as `measure` sizes the
    first k, reaches past it; after the last, the answer's opening."""
    low, high = 1, len(messages)
    if not messages or measure(high) <= at:
        return Place(len(messages), "assistant")
    while low < high:
        middle = (low + high) // 2
        if measure(middle) > at:
            high = middle
        else:
            low = middle + 1
    return Place(low - 1, str(messages[low - 1]["role"]))
