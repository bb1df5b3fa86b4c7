"""Calls written as JSON objects after a marker (or bare): parsed as they grow, and their grammar."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from app.chat_formats.base import ChatFormat, Function, Parsed, ToolCall, held_back, json_literal
from app.chat_formats.json_scan import Incomplete, skip_space, string_prefix, value_end


@dataclass
class Keys:
    """The keys a format's call object uses, in the order its model writes them."""

    name: str = "name"
    arguments: tuple[str, ...] = ("arguments",)
    id: str | None = None
    # How a grammar-bound call is written: NAME, ARGS and an id (ID9: nine letters or
    # digits as Mistral wants them, IDN: a number) between literal text.
    layout: str = '{"name": NAME, "arguments": ARGS}'


class JsonCallFormat(ChatFormat):
    """Calls written as `<start>{call}<end>` (one per marker) or `<start>[{call}, ...]<end>`."""

    def __init__(
        self,
        name: str,
        start: str,
        end: str = "",
        *,
        array: bool = False,
        keys: Keys | None = None,
        separator: str = "\n",
        wrappers: tuple[str, ...] = (),
        thinking_tags: tuple[str, str] | None = ("<think>", "</think>"),
        newlines: bool = False,
        parallel_calls: bool = True,
        bare_prefix: str = "",
    ) -> None:
        self.name, self.start, self.end, self.array = name, start, end, array
        self.keys = keys or Keys()
        self.separator, self.wrappers, self.thinking_tags = separator, wrappers, thinking_tags
        self.triggers = (start,) if start else ()
        self.extra_markers = tuple(marker for marker in (end, bare_prefix) if marker)
        self.bare_prefix = bare_prefix  # a marker a bare call may start with
        self.starts_bare = not start
        self.layout = self.keys.layout
        # Hermes' calls sit on their own line between the tags; ours stay one call, as before.
        self.newlines, self.parallel_calls = newlines, parallel_calls

    def parse(self, text: str, partial: bool, functions: tuple[Function, ...] = ()) -> Parsed:
        parsed = Parsed()
        position = 0
        while True:
            found = self._next_call(text, position)
            if found < 0:
                rest = text[position:]
                if partial:
                    rest = rest[: len(rest) - held_back(rest, self.markers)]
                    if self.bare_prefix and rest.rstrip().endswith(self.bare_prefix):
                        rest = rest.rstrip().removesuffix(self.bare_prefix)  # its call comes next
                parsed.content += rest
                break
            parsed.content += text[position:found]
            body = skip_space(text, found + len(self.start))
            if self.bare_prefix and text.startswith(self.bare_prefix, body):
                body = skip_space(text, body + len(self.bare_prefix))
            try:
                calls, position = self._calls_at(text, body)
            except Incomplete as cut:
                parsed.calls.extend(cut.args[0] if cut.args else [])
                if not partial and not parsed.calls and self.starts_bare:
                    parsed.content += text[found:]  # bare JSON that never became a call
                break
            except ValueError:
                parsed.content += text[found:]  # not a call after all: the text stays
                break
            parsed.calls.extend(calls)
            position = self._after_end(text, position)
        parsed.content = self.clean(parsed.content)
        return parsed

    def trigger_patterns(self, functions: tuple[Function, ...] = ()) -> list[str]:
        patterns = super().trigger_patterns(functions)
        if self.bare_prefix:  # a tagged bare call: the grammar takes over at its `{`
            patterns.append(r"^\s*" + re.escape(self.bare_prefix) + r"\s*(\{)[\s\S]*")
        return patterns

    def _next_call(self, text: str, position: int) -> int:
        if self.start:
            return text.find(self.start, position)
        # A bare call opens the answer, or follows another call; Llama 3 may tag it first.
        at = skip_space(text, position)
        tagged = skip_space(text, at + len(self.bare_prefix)) if self.bare_prefix else at
        if self.bare_prefix and text.startswith(self.bare_prefix, at) and text.startswith("{", tagged):
            return at
        return at if text.startswith("{", at) else -1

    def _after_end(self, text: str, position: int) -> int:
        at = skip_space(text, position)
        if self.end and text.startswith(self.end, at):
            at = skip_space(text, at + len(self.end))
        separator = self.separator.strip()
        if separator and text.startswith(separator, at):  # Llama 3's `;` between calls
            at = skip_space(text, at + len(separator))
        return at

    def _calls_at(self, text: str, position: int) -> tuple[list[ToolCall], int]:
        """The calls beginning at `position` and where they end; Incomplete carries those so far."""
        if not self.array:
            call, end = self._call_at(text, position, [])
            return [call], end
        if position >= len(text):
            raise Incomplete([])
        if text[position] != "[":
            raise ValueError("expected [")
        calls: list[ToolCall] = []
        position = skip_space(text, position + 1)
        while True:
            if position >= len(text):
                raise Incomplete(calls)
            if text[position] == "]":
                return calls, position + 1
            call, position = self._call_at(text, position, calls)
            calls.append(call)
            position = skip_space(text, position)
            if text.startswith(",", position):
                position = skip_space(text, position + 1)

    def _call_at(self, text: str, position: int, before: list[ToolCall]) -> tuple[ToolCall, int]:
        """One call object, its keys read one by one so that a growing one is already usable."""
        keys = self.keys
        if position >= len(text):
            raise Incomplete(before)
        if text[position] != "{":
            raise ValueError("expected {")
        call = ToolCall(name="", complete=False)
        position = skip_space(text, position + 1)
        while True:
            if position >= len(text):
                raise Incomplete(_with(before, call))
            if text[position] == "}":
                break
            key = string_prefix(text, position)
            if key is None:
                raise Incomplete(_with(before, call))
            position = skip_space(text, value_end(text, position))
            if not text.startswith(":", position):
                raise Incomplete(_with(before, call)) if position >= len(text) else ValueError(":")
            start = skip_space(text, position + 1)
            try:
                end = value_end(text, start)
            except Incomplete:
                if key in keys.arguments:
                    call.arguments = text[start:]
                raise Incomplete(_with(before, call)) from None
            self._set_key(call, key, text[start:end])
            position = skip_space(text, end)
            if text.startswith(",", position):
                position = skip_space(text, position + 1)
        if not call.name:
            raise ValueError("a call without a name")
        if not call.arguments and self.starts_bare:
            raise ValueError("a bare object without arguments is not a call")
        call.arguments = call.arguments or "{}"
        call.complete = True
        return call, position + 1

    def _set_key(self, call: ToolCall, key: str, raw: str) -> None:
        """One complete key of a call object: its name, arguments or id (other keys are ignored)."""
        keys, value = self.keys, json.loads(raw)
        if key == keys.name:
            call.name = value if isinstance(value, str) else ""
        elif key in keys.arguments:
            # Some models write the arguments as a JSON string holding the object.
            call.arguments = _object_text(value) if isinstance(value, str) else raw
            if not isinstance(value, str | dict):
                raise ValueError("arguments that are not an object")
        elif key == keys.id:
            call.id = str(value)

    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        one = (
            "("
            + " | ".join(
                self._call_expression(f.name, args) for f, args in zip(functions, args_rules, strict=True)
            )
            + ")"
        )
        parallel = parallel and self.parallel_calls
        if self.array:
            more = f' ("," " "? {one})*' if parallel else ""
            return _joined(self.start, f'"[" {one}{more} "]"', self.end)
        gap = "\n" if self.newlines else ""
        block = _joined(self.start + gap, one, gap + self.end if self.end else "")
        if parallel:
            return f"{block} ({json_literal(self.separator)} {block})*"
        return block

    def _call_expression(self, name: str, args_rule: str) -> str:
        """One call of `name` in the layout its model writes: literal text around the arguments."""
        parts = []
        for piece in re.split(r"(NAME|ARGS|ID9|IDN)", self.layout):
            if piece == "NAME":
                parts.append(json_literal(json.dumps(name)))
            elif piece == "ARGS":
                parts.append(args_rule)
            elif piece in _ID_RULES:
                parts.append(_ID_RULES[piece])
            elif piece:
                parts.append(json_literal(piece))
        return " ".join(parts)


_ID_RULES = {"ID9": '"\\"" [a-zA-Z0-9]{9} "\\""', "IDN": '"\\"" [0-9]{1,9} "\\""'}


def _object_text(value: str) -> str:
    """Arguments written as a string: the JSON object it holds, or not a call."""
    if not isinstance(json.loads(value), dict):
        raise ValueError("arguments that are not an object")
    return value


def _joined(opening: str, middle: str, closing: str) -> str:
    """A GBNF sequence of literal text, an expression and literal text; empty literals left out."""
    return " ".join(
        part
        for part in (opening and json_literal(opening), middle, closing and json_literal(closing))
        if part
    )


def _with(before: list[ToolCall], call: ToolCall) -> list[ToolCall]:
    """The calls so far, the growing one included once its name is known."""
    return [*before, call] if call.name else list(before)
