"""A conversation as the model reads it: earlier tool calls written out, the tools described, templated."""

from __future__ import annotations

from typing import Any

from app.api.common import tools
from app.engine.tokenizer import Tokenizer


def prompt_tokens(tokenizer: Tokenizer, messages: list[dict[str, Any]], chat: dict[str, Any]) -> list[int]:
    """The tokens of `messages` after the model's chat template, for a request with `chat`'s tools."""
    messages = tools.with_calls_as_text(messages)
    if tools.active(chat):
        messages = tools.with_tool_instructions(messages, chat["tools"])
    return tokenizer.chat(messages)
