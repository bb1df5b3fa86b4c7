"""A conversation longer than the context: refused (`error`), or its oldest turns dropped (`truncate`).

A turn is a user message and everything after it up to the next user message: the
assistant's answers, its tool calls and their results. Only whole turns go, oldest first,
after the leading system and developer messages, so no message is cut and no tool
result loses its call; the last turn always stays (if it alone does not fit, the request
is refused as before). How many turns to drop is found by bisection over renderings of
the conversation, which only grow with the turns they keep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from flask import Response, g

from app.api.prompting.conversation import ChatPrompt, prompt
from app.api.requests.chat import ChatRequest
from app.engine.tokenizer import Tokenizer
from app.settings.config import Config

HEADER = "X-Context-Truncated-Messages"  # how many messages were dropped, when some were
LEADING = ("system", "developer")  # kept whatever is dropped

Prompt = TypeVar("Prompt")


@dataclass(frozen=True)
class Fitted:
    """The request as it fits (its messages maybe fewer), its prompt, and what was dropped."""

    chat: ChatRequest
    prompt: ChatPrompt
    dropped_messages: int = 0


def truncates(chat: ChatRequest, config: Config) -> bool:
    """Whether an overlong conversation loses its oldest turns: as the request says, else the server."""
    if chat.truncation is not None:
        return chat.truncation == "auto"
    return config.context_overflow == "truncate"


def fitted_prompt(
    tokenizer: Tokenizer, chat: ChatRequest, config: Config, window: int | None = None
) -> Fitted:
    """The conversation's prompt, its oldest turns dropped if it truncates and does not fit the
    context (or `window`, a smaller one the request asked for: Ollama's num_ctx)."""
    if not truncates(chat, config):
        return Fitted(chat, prompt(tokenizer, chat, config))
    n_ctx = min(window or config.n_ctx, config.n_ctx)
    limit = n_ctx - room_needed(chat, config, n_ctx)
    render = lambda asked: prompt(tokenizer, asked, config)  # noqa: E731
    shorter, made, dropped = fit(chat, render, lambda p: len(p.tokens), limit)
    return Fitted(shorter, made, dropped)


def reported(response: Response, fitted: Fitted) -> Response:
    """The answer, saying how many messages were dropped (a header, and the access log's line)."""
    if fitted.dropped_messages:
        response.headers[HEADER] = str(fitted.dropped_messages)
        g.stats.dropped_messages = fitted.dropped_messages
    return response


def turn_starts(messages: Sequence[dict[str, Any]]) -> tuple[int, list[int]]:
    """Where the conversation begins after its leading system/developer messages, and where each of
    its turns begins (the first at that point, then at each user message)."""
    first = 0
    while first < len(messages) and messages[first].get("role") in LEADING:
        first += 1
    starts = [first] if first < len(messages) else []
    starts += [i for i in range(first + 1, len(messages)) if messages[i].get("role") == "user"]
    return first, starts


def without_turns(messages: Sequence[dict[str, Any]], dropped: int) -> list[dict[str, Any]]:
    """The messages without their `dropped` oldest turns (the leading ones kept)."""
    first, starts = turn_starts(messages)
    if dropped <= 0 or not starts:
        return list(messages)
    return [*messages[:first], *messages[starts[min(dropped, len(starts) - 1)] :]]


def room_needed(chat: ChatRequest, config: Config, n_ctx: int) -> int:
    """The tokens an answer needs beside the prompt in a context of `n_ctx`: `max_tokens` as asked,
    else the server's default answer length, else a quarter of the context."""
    asked = chat.max_tokens or config.default_max_tokens or n_ctx // 4
    return min(asked, config.max_tokens_limit, n_ctx - 1)


def fit(
    chat: ChatRequest,
    render: Callable[[ChatRequest], Prompt],
    size: Callable[[Prompt], int],
    limit: int,
) -> tuple[ChatRequest, Prompt, int]:
    """`chat` with the fewest oldest turns dropped for its prompt to be at most `limit` tokens, its
    prompt, and the messages dropped (if even its last turn is longer, the whole request: planning
    refuses it as before)."""
    whole = render(chat)
    turns = len(turn_starts(chat.messages)[1])
    if size(whole) <= limit or turns < 2:
        return chat, whole, 0
    low, high = 1, turns - 1  # drop at least one turn, at most all but the last
    best: tuple[ChatRequest, Prompt] | None = None
    while low <= high:
        middle = (low + high) // 2
        shorter = replace(chat, messages=without_turns(chat.messages, middle))
        rendered = render(shorter)
        if size(rendered) <= limit:
            best, high = (shorter, rendered), middle - 1
        else:
            low = middle + 1
    if best is None:
        return chat, whole, 0
    fitted, made = best
    return fitted, made, len(chat.messages) - len(fitted.messages)
