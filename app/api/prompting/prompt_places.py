"""Which message of a conversation a prompt token falls in: for saying where a prompt left the cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.api.http.errors import APIError
from app.api.prompting.conversation import prompt
from app.api.requests.chat import ChatRequest
from app.engine.errors import EngineError
from app.engine.tokenizer import Tokenizer
from app.settings.config import Config


@dataclass(frozen=True)
class Place:
    """Where a prompt token falls: its message's index in the conversation and role."""

    message: int
    role: str


# What a view knows of its prompt: the message a token position falls in (None if unknown).
Locate = Callable[[int], Place | None]


def locator(tokenizer: Tokenizer, chat: ChatRequest, config: Config) -> Locate:
    """A function from a token position of `chat`'s prompt to the message it falls in, found by
    bisection over renderings of the first k messages (which only grow with k); asked only when
    a prompt left the cache, so its renderings cost nothing on a hit."""

    def tokens_up_to(count: int) -> int:
        shorter = replace(chat, messages=chat.messages[:count], add_generation_prompt=False,
                          continue_final_message=None)  # fmt: skip
        return len(prompt(tokenizer, shorter, config).tokens)

    def locate(at: int) -> Place | None:
        messages = chat.messages
        low, high = 1, len(messages)
        try:
            if not messages or tokens_up_to(high) <= at:
                return Place(len(messages), "assistant")  # in the answer's opening, after every message
            while low < high:  # the fewest messages whose prompt reaches past `at`
                middle = (low + high) // 2
                if tokens_up_to(middle) > at:
                    high = middle
                else:
                    low = middle + 1
        except (
            EngineError,
            APIError,
            ValueError,
        ):  # a template that will not render a part of the conversation
            return None
        return Place(low - 1, str(messages[low - 1]["role"]))

    return locate
