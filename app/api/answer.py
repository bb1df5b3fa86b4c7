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
    choices_per_prompt: int = 1  # `n`

    def cached(self, index: int, cached_tokens: int) -> int:
        """A choice's share of the prompt tokens served from cache: its prompt's, counted once."""
        return cached_tokens if index % self.choices_per_prompt == 0 else 0
