"""An answer bounded by the context window, as Anthropic's API bounds it, rather than refused.

Claude Code asks for max_tokens 32000 whatever the model, and Anthropic's API (since its
4.5 models) takes a request whose prompt and max_tokens together pass the context window:
the answer stops where the window ends, with stop_reason `model_context_window_exceeded`.
Only a prompt that leaves no room at all is refused, with the message Claude Code reads to
compact the conversation ("prompt is too long: N tokens > M maximum").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.requests.chat import ChatRequest
from app.settings.config import Config


def within(chat: ChatRequest, prompt_tokens: int, config: Config) -> tuple[ChatRequest, bool]:
    """`chat` with max_tokens cut to the room the prompt leaves, and whether it was cut."""
    room = config.n_ctx - prompt_tokens
    if room < 1:
        raise ContextLengthError(
            f"prompt is too long: {prompt_tokens} tokens > {config.n_ctx - 1} maximum", param="messages"
        )
    asked = chat.max_tokens
    if asked is not None and config.max_tokens_limit < min(asked, config.n_ctx):  # the operator's cap
        raise InvalidRequestError(
            f"max_tokens: {asked} > {config.max_tokens_limit}, which is the maximum allowed number of "
            f"output tokens for {config.model_id}",
            param="max_tokens",
        )
    if asked is None or asked <= room:
        return chat, False
    return replace(chat, max_tokens=room), True


def bound(config: Config) -> Callable[[ChatRequest, int], ChatRequest]:
    """`within` as the chat job's bound: the request once its prompt's size is known."""
    return lambda chat, prompt_tokens: within(chat, prompt_tokens, config)[0]
