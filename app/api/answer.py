"""How an answer presents its choices: chat or text, echoed prompts, usage, and tool calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Answer:
    """What the presenters need beyond the chunks themselves."""

    chat: bool
    prompt_tokens: int
    prefixes: dict[int, str] = field(default_factory=dict)  # `echo`: prompt text per choice
    include_usage: bool = False
    tools: list[dict[str, Any]] | None = None  # set when the answer may be tool calls
    tools_forced: bool = False
