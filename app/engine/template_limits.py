"""Bounds on rendering a chat template: a GGUF's template is code, and a hostile one may loop or write
megabytes; rendering stops at a step budget and an output size, as the messages' error.

A template loops only through `range` (its other loops run over the messages, which the body
limit bounds) or recursion (Python's own limit). So each render gets a budget of `range` steps,
and its text is gathered piece by piece up to a size; past either, the render raises
ValueError, which the caller answers as the template rejecting the messages (a 400), and at
load time as a model that cannot serve (the load's error names the file).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from jinja2 import Template

STEPS = 1_000_000  # range steps in one render: real templates take a few thousand at most
CHARACTERS = 4 << 20  # a prompt's text: far beyond any context window's tokens


class TemplateLimitError(ValueError):
    """A render went past its step budget or its size."""


class _Budget(threading.local):
    left = STEPS


_budget = _Budget()


def _bounded_range(*args: int) -> Iterator[int]:
    """The sandbox's range, each step taken from this render's budget."""
    from jinja2.sandbox import safe_range

    for value in safe_range(*args):
        _budget.left -= 1
        if _budget.left < 0:
            raise TemplateLimitError(f"the chat template loops past {STEPS:,} steps")
        yield value


class BoundedTemplate:
    """A compiled template whose `render` keeps to the budget and the size."""

    def __init__(self, template: Template) -> None:
        self._template = template
        template.globals["range"] = _bounded_range

    def render(self, *args: Any, **kwargs: Any) -> str:
        _budget.left = STEPS
        pieces, size = [], 0
        for piece in self._template.generate(*args, **kwargs):
            size += len(piece)
            if size > CHARACTERS:
                raise TemplateLimitError(f"the chat template writes more than {CHARACTERS:,} characters")
            pieces.append(piece)
        return "".join(pieces)


def bound(formatter: Any) -> Any:
    """`formatter` (llama-cpp-python's Jinja2ChatFormatter, which renders its `_environment`, a
    compiled template) made to render within the bounds; returned for chaining."""
    formatter._environment = BoundedTemplate(formatter._environment)
    return formatter
