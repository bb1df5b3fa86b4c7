"""Where a JSON value ends in a text that may still be growing: the parsers' one piece of JSON lexing."""

from __future__ import annotations

import json
import re
from typing import Any

_WHITESPACE = re.compile(r"\s*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class Incomplete(Exception):  # noqa: N818 - a state of the text, not a failure
    """The value has begun but the text ends before it does."""


def skip_space(text: str, position: int) -> int:
    """The first position at or after `position` that is not whitespace."""
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def value_end(text: str, start: int) -> int:
    """The position just after the JSON value that begins at `start`.

    Raises Incomplete when the text ends inside the value, ValueError when it is not JSON.
    Only where values end is checked here; json.loads checks the whole once it has ended.
    """
    if start >= len(text):
        raise Incomplete
    first = text[start]
    if first == '"':
        match = _STRING.match(text, start)
        if match is None:
            raise Incomplete
        return match.end()
    if first in "{[":
        return _container_end(text, start)
    match = _SCALAR.match(text, start)
    if match is None:
        if any(word.startswith(text[start:]) for word in ("true", "false", "null")) or text[start:] == "-":
            raise Incomplete
        raise ValueError(f"not JSON at {start}")
    if match.end() == len(text) and first not in "tfn":
        raise Incomplete  # a number may go on
    return match.end()


def _container_end(text: str, start: int) -> int:
    depth, position = 0, start
    while position < len(text):
        char = text[position]
        if char == '"':
            match = _STRING.match(text, position)
            if match is None:
                raise Incomplete
            position = match.end()
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    raise Incomplete


def loads_at(text: str, start: int) -> tuple[Any, int]:
    """The complete JSON value at `start` and the position after it (Incomplete, or ValueError)."""
    end = value_end(text, start)
    return json.loads(text[start:end]), end


def string_prefix(text: str, start: int) -> str | None:
    """The complete JSON string at `start`, decoded; None if it has not ended yet."""
    try:
        value, _ = loads_at(text, start)
    except Incomplete:
        return None
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value
