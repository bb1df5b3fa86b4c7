"""Formats that tag each call: DeepSeek R1 / V3 (name, then fenced JSON) and Qwen3-Coder (XML parameters)."""

from __future__ import annotations

import json
import re

from app.chat_formats.base import ChatFormat, Function, Parsed, ToolCall, held_back, json_literal
from app.chat_formats.json_scan import Incomplete, skip_space, value_end


class TaggedCallFormat(ChatFormat):
    """Calls inside a block `<open>...<close>`, each parsed by the subclass's `_call_at`."""

    block: tuple[str, str] = ("", "")

    def parse(self, text: str, partial: bool, functions: tuple[Function, ...] = ()) -> Parsed:
        parsed = Parsed()
        position = 0
        opening, closing = self.block
        while True:
            found = text.find(opening, position)
            if found < 0:
                rest = text[position:]
                parsed.content += rest[: len(rest) - held_back(rest, (opening,))] if partial else rest
                return parsed
            parsed.content += text[position:found]
            position = skip_space(text, found + len(opening))
            try:
                while not text.startswith(closing, position):
                    if closing.startswith(text[position:]):
                        raise Incomplete  # the block's end is being written
                    call, position = self._call_at(text, position, functions)
                    parsed.calls.append(call)
                    position = skip_space(text, position)
            except Incomplete as cut:
                parsed.calls.extend(cut.args)
                return parsed
            except ValueError:
                parsed.content += text[found:]
                return parsed
            position = skip_space(text, position + len(closing))

    def _call_at(self, text: str, position: int, functions: tuple[Function, ...]) -> tuple[ToolCall, int]:
        raise NotImplementedError


def _expect(text: str, position: int, literal: str, partial_call: ToolCall | None = None) -> int:
    """The position after `literal` at `position`: Incomplete if the text stops inside it."""
    if text.startswith(literal, position):
        return position + len(literal)
    if literal.startswith(text[position:]):
        raise Incomplete(*([partial_call] if partial_call and partial_call.name else []))
    raise ValueError(f"expected {literal!r}")


class DeepSeekR1(TaggedCallFormat):
    """`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>...`."""

    name = "DeepSeek R1"
    block = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")
    triggers = ("<｜tool▁calls▁begin｜>",)
    extra_markers = ("<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>")
    # What comes before a call's name, between its name and its arguments, and after them.
    _call = ("<｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n", "\n```<｜tool▁call▁end｜>")

    def _call_at(self, text: str, position: int, functions: tuple[Function, ...]) -> tuple[ToolCall, int]:
        opening, separator, closing = self._call
        position = _expect(text, position, opening)
        name_end = text.find(separator, position)
        if name_end < 0:
            raise Incomplete  # the name, or what follows it, is still being written
        call = ToolCall(text[position:name_end].strip(), complete=False)
        start = skip_space(text, name_end + len(separator))
        try:
            end = value_end(text, start)
        except Incomplete:
            call.arguments = text[start:]
            raise Incomplete(call) from None
        json.loads(text[start:end])
        call.arguments, call.complete = text[start:end], True
        # A closing that starts with its own newline is read as written; others after any space.
        return call, _expect(text, end if closing[0].isspace() else skip_space(text, end), closing)

    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        opening, separator, closing = self._call
        one = " | ".join(
            f"{json_literal(opening + f.name + separator)} {args} {json_literal(closing)}"
            for f, args in zip(functions, args_rules, strict=True)
        )
        repeat = "+" if parallel else ""
        return f"{json_literal(self.block[0])} ({one}){repeat} {json_literal(self.block[1])}"


class DeepSeekV31(DeepSeekR1):
    """V3.1's calls, unfenced: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>`."""

    name = "DeepSeek V3.1"
    _call = ("<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>")


_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?")


class Qwen3Coder(TaggedCallFormat):
    """`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>`."""

    name = "Qwen3-Coder XML"
    block = ("<tool_call>", "</tool_call>")
    triggers = ("<tool_call>",)
    extra_markers = ("</tool_call>",)

    def _call_at(self, text: str, position: int, functions: tuple[Function, ...]) -> tuple[ToolCall, int]:
        position = _expect(text, position, "<function=")
        header_end = text.find(">", position)
        if header_end < 0:
            raise Incomplete
        call = ToolCall(text[position:header_end], "{", complete=False)
        types = _parameter_types(functions, call.name)
        position = skip_space(text, header_end + 1)
        values: dict[str, object] = {}
        while not text.startswith("</function>", position):
            if "</function>".startswith(text[position:]):
                raise Incomplete(call)
            match = _PARAMETER.match(text, position)
            if match is None:
                _expect(text, position, "<parameter=", call)
                raise Incomplete(call)
            close = text.find("</parameter>", match.end())
            if close < 0:
                raise Incomplete(call)
            key, raw = match.group(1), text[match.end() : close].removesuffix("\n")
            values[key] = _typed(raw, types.get(key))
            call.arguments = json.dumps(values, ensure_ascii=False)[:-1]  # still open
            position = skip_space(text, close + len("</parameter>"))
        call.arguments, call.complete = json.dumps(values, ensure_ascii=False), True
        return call, position + len("</function>")

    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        one = " | ".join(
            f'"<function=" {json_literal(f.name)} ">\\n" {_parameters_rule(f)} "</function>\\n"'
            for f in functions
        )
        block = f'"<tool_call>\\n" ({one}) "</tool_call>"'
        return f'{block} ("\\n" {block})*' if parallel else block


def _parameter_types(functions: tuple[Function, ...], name: str) -> dict[str, object]:
    for function in functions:
        if function.name == name:
            return {k: v.get("type") for k, v in (function.parameters.get("properties") or {}).items()}
    return {}


def _typed(raw: str, kind: object) -> object:
    """A parameter's text as its declared type: strings as written, anything else as JSON if it parses."""
    if kind == "string":
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _parameters_rule(function: Function) -> str:
    """Each declared parameter once, required ones always, in the declared order; values are free text."""
    properties = function.parameters.get("properties") or {}
    required = set(function.parameters.get("required") or [])
    parts = []
    for key in properties:
        one = f'"<parameter=" {json_literal(key)} ">\\n" [^<]* "\\n</parameter>\\n"'
        parts.append(one if key in required else f"({one})?")
    return " ".join(parts) or '""'


class MistralArgs(ChatFormat):
    """Devstral / Magistral / Ministral: `[TOOL_CALLS]NAME[ARGS]{args}`, one marker per call."""

    name = "Magistral"
    triggers = ("[TOOL_CALLS]",)
    extra_markers = ("[ARGS]",)
    thinking_tags = ("[THINK]", "[/THINK]")

    def parse(self, text: str, partial: bool, functions: tuple[Function, ...] = ()) -> Parsed:
        parsed = Parsed()
        pieces = text.split("[TOOL_CALLS]")
        head = pieces[0]
        parsed.content = (
            head[: len(head) - held_back(head, self.triggers)] if partial and len(pieces) == 1 else head
        )
        for piece in pieces[1:]:
            marker = piece.find("[ARGS]")
            if marker < 0:
                break  # the name is still being written
            call = ToolCall(piece[:marker].strip(), complete=False)
            start = skip_space(piece, marker + len("[ARGS]"))
            try:
                end = value_end(piece, start)
            except (Incomplete, ValueError):
                call.arguments = piece[start:]
                parsed.calls.append(call)
                break
            call.arguments, call.complete = piece[start:end], True
            parsed.calls.append(call)
            after = piece[end:]
            last = piece is pieces[-1]
            parsed.content += (
                after[: len(after) - held_back(after, self.triggers)] if partial and last else after
            )
        return parsed

    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        one = " | ".join(
            f"{json_literal('[TOOL_CALLS]' + f.name + '[ARGS]')} {args}"
            for f, args in zip(functions, args_rules, strict=True)
        )
        return f"({one})+" if parallel else f"({one})"
