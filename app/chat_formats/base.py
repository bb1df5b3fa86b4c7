"""What every chat format provides: parsed calls, a grammar for them, the text that starts one."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """One call as the model wrote it; `arguments` is JSON text, growing while `complete` is False."""

    name: str
    arguments: str = ""
    id: str | None = None  # only formats that write ids (Mistral's, Command R7B's) have one
    complete: bool = True


@dataclass
class Parsed:
    """An answer split into its visible text, its reasoning and its calls."""

    content: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class Function:
    """A declared function: its name and the JSON schema of its arguments; `input_format`, for a tool
    whose one argument is free text following a grammar: (its syntax, "lark" or "regex"; its text)."""

    name: str
    parameters: dict[str, Any]
    input_format: tuple[str, str] | None = field(default=None, compare=False)


class ChatFormat(ABC):
    """A model family's way of writing tool calls (and, through its tags, its reasoning)."""

    name: str = ""
    # Text that begins a call: while the answer's tail could be the start of one, it is
    # held back from `content`; the lazy grammar wakes when one appears.
    triggers: tuple[str, ...] = ()
    # True when a call may open the answer with no marker (Llama 3's bare JSON, ours).
    starts_bare: bool = False
    # Markers around the visible text that are not part of it (Granite's <response>).
    wrappers: tuple[str, ...] = ()
    # Tags the model thinks between, when its template says it thinks that way.
    thinking_tags: tuple[str, str] | None = ("<think>", "</think>")
    # Further markup the parser must see: a GGUF may hold these as control tokens, which
    # llama.cpp writes as nothing unless asked (llama-server's "preserved tokens").
    extra_markers: tuple[str, ...] = ()

    @property
    def markers(self) -> tuple[str, ...]:
        """Every piece of markup this format's answers may hold."""
        return (*self.triggers, *self.wrappers, *(self.thinking_tags or ()), *self.extra_markers)

    @abstractmethod
    def parse(self, text: str, partial: bool, functions: tuple[Function, ...] = ()) -> Parsed:
        """The calls in `text` and the text around them. While `partial`, what may still become
        markup is held back and the last call may be unfinished."""

    @abstractmethod
    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        """The GBNF expression for the answer's calls, given each function's arguments rule."""

    def trigger_patterns(self, functions: tuple[Function, ...] = ()) -> list[str]:
        """Regular expressions the lazy grammar waits for; the first group is where it starts."""
        patterns = [r"[\s\S]*?(" + re.escape(t) + r")[\s\S]*" for t in self.triggers]
        if self.starts_bare:
            patterns.append(r"^\s*(\{)[\s\S]*")
        return patterns

    def clean(self, content: str) -> str:
        """Visible text without the format's wrapper markers."""
        for marker in self.wrappers:
            content = content.replace(marker, "")
        return content


def held_back(text: str, markers: tuple[str, ...]) -> int:
    """How many characters at the end of `text` could be the start of one of `markers`."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest


def json_literal(text: str) -> str:
    """A GBNF string literal matching exactly `text`."""
    return json.dumps(text, ensure_ascii=False)
