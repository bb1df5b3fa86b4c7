"""Answer readers for presenter tests: our own format (or another) over OpenAI-shaped tools."""

from __future__ import annotations

from typing import Any

from app.chat_formats.answer import AnswerReader
from app.chat_formats.base import Function
from app.chat_formats.detect import by_name


def reader(
    tools: list[dict[str, Any]] | None, fmt: str = "Generic", thinking: bool = False, forced: bool = False
) -> AnswerReader:
    """How a request with `tools` (None: none) reads its answers in format `fmt`."""
    functions = tuple(
        Function(t["function"]["name"], t["function"].get("parameters") or {"type": "object"})
        for t in tools or []
    )
    return AnswerReader(by_name(fmt), functions, thinking, forced=forced)
