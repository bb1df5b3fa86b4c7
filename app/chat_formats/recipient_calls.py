"""Formats that address each message: Functionary v3.2 (`>>>recipient`) and GPT-OSS (harmony channels)."""

from __future__ import annotations

import json
import re

from app.chat_formats.base import ChatFormat, Function, Parsed, ToolCall, held_back, json_literal
from app.chat_formats.json_scan import Incomplete, skip_space, value_end


class FunctionaryV32(ChatFormat):
    """`all\\ntext` or `NAME\\n{args}`, messages joined by `>>>` (the prompt ends with the first `>>>`)."""

    name = "Functionary v3.2"
    triggers = (">>>",)
    thinking_tags = None

    def parse(self, text: str, partial: bool, functions: tuple[Function, ...] = ()) -> Parsed:
        parsed = Parsed()
        for segment_start, segment in _segments(text.removeprefix(">>>")):
            newline = segment.find("\n")
            if newline < 0:
                if not partial:
                    parsed.content += segment
                break  # the recipient is still being written
            recipient, body = segment[:newline].strip(), segment[newline + 1 :]
            if recipient == "all":
                last = segment_start + len(segment) == len(text.removeprefix(">>>"))
                cut = held_back(body, self.triggers) if partial and last else 0
                parsed.content += body[: len(body) - cut]
                continue
            call = ToolCall(recipient, complete=False)
            start = skip_space(body, 0)
            try:
                end = value_end(body, start)
            except Incomplete:
                call.arguments = body[start:]
                parsed.calls.append(call)
                break
            except ValueError:  # python's raw code, or text that is not a call
                call.arguments, call.complete = json.dumps({"code": body}), not partial
                parsed.calls.append(call)
                continue
            call.arguments, call.complete = body[start:end], True
            parsed.calls.append(call)
        return parsed

    def trigger_patterns(self) -> list[str]:
        # A call opens the answer (any recipient but `all`) or follows `>>>`.
        return [r"^(?!all\n)([A-Za-z_][\s\S]*)", r"[\s\S]*?(>>>)(?!all\n)[\s\S]*"]

    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        one = (
            "("
            + " | ".join(
                f"{json_literal(f.name + chr(10))} {args}"
                for f, args in zip(functions, args_rules, strict=True)
            )
            + ")"
        )
        more = f' (">>>" {one})*' if parallel else ""
        return f'">>>"? {one}{more}'


def _segments(text: str) -> list[tuple[int, str]]:
    positions, start = [], 0
    for part in text.split(">>>"):
        positions.append((start, part))
        start += len(part) + 3
    return positions


_HEADER = re.compile(
    r"(?:<\|start\|>assistant)?(?P<header>[^<]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?)<\|message\|>"
)
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_CALL_HEAD = "<|channel|>commentary to=functions."
_ENDS = ("<|end|>", "<|call|>", "<|return|>", "<|start|>")


class GptOss(ChatFormat):
    """Harmony: `<|channel|>analysis<|message|>...<|end|>`, `... to=functions.NAME ...<|message|>{args}`."""

    name = "GPT-OSS"
    triggers = (" to=functions.",)
    extra_markers = ("<|channel|>", "<|message|>", "<|constrain|>", *_ENDS)
    thinking_tags = None

    def parse(self, text: str, partial: bool, functions: tuple[Function, ...] = ()) -> Parsed:
        parsed = Parsed()
        position = 0
        while position < len(text):
            header = _HEADER.match(text, position)
            if header is None:  # the header is still being written, or the text has none
                if (
                    not partial
                    and "<|message|>" not in text[position:]
                    and "<|channel|>" not in text[position:]
                ):
                    parsed.content += text[position:]
                break
            body_start = header.end()
            end, closed = _body_end(text, body_start)
            body = text[body_start:end]
            if partial and not closed:
                body = body[: len(body) - held_back(body, _ENDS)]
            recipient = _RECIPIENT.search(header.group("header"))
            channel = re.search(r"<\|channel\|>(\w+)", header.group("header"))
            if recipient:
                call = ToolCall(recipient.group(1), body.strip(), complete=closed or not partial)
                parsed.calls.append(call)
            elif channel and channel.group(1) == "analysis":
                parsed.reasoning += body
            else:
                parsed.content += body
            position = end
            for marker in _ENDS[:3]:
                if text.startswith(marker, position):
                    position += len(marker)
        return parsed

    def call_rule(self, functions: list[Function], args_rules: list[str], parallel: bool) -> str:
        one = " | ".join(
            f"{json_literal(_CALL_HEAD + f.name + ' <|constrain|>json<|message|>')} {args}"
            for f, args in zip(functions, args_rules, strict=True)
        )
        return f"({one})"

    def trigger_patterns(self) -> list[str]:
        return [r"[\s\S]*?(<\|channel\|>commentary to=functions\.)[\s\S]*"]


def _body_end(text: str, start: int) -> tuple[int, bool]:
    """Where a message's body ends, and whether its end marker has been written."""
    ends = [found for marker in _ENDS if (found := text.find(marker, start)) >= 0]
    return (min(ends), True) if ends else (len(text), False)
