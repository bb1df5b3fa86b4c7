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
        segments = text.removeprefix(">>>").split(">>>")
        for position, segment in enumerate(segments):
            last = position == len(segments) - 1
            newline = segment.find("\n")
            if newline < 0:
                if not partial:
                    parsed.content += segment
                break  # the recipient is still being written
            recipient, body = segment[:newline].strip(), segment[newline + 1 :]
            if recipient == "all":
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
            except ValueError:  # python's raw code: its arguments once it has ended
                growing = partial and last
                call.arguments, call.complete = ("", False) if growing else (json.dumps({"code": body}), True)
                parsed.calls.append(call)
                continue
            call.arguments, call.complete = body[start:end], True
            parsed.calls.append(call)
        return parsed

    def trigger_patterns(self, functions: tuple[Function, ...] = ()) -> list[str]:
        # A call opens the answer or follows `>>>`: a declared function's name and its
        # newline, so that `all` (text) and a name still being written wake nothing. The
        # schemas hold names to [A-Za-z0-9_-], so the pattern always compiles in std::regex.
        names = "|".join(re.escape(f.name) for f in functions) or "[^\\s>]+"
        return [rf"^((?:{names})\n)[\s\S]*", rf"[\s\S]*?(>>>(?:{names})\n)[\s\S]*"]

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

    def trigger_patterns(self, functions: tuple[Function, ...] = ()) -> list[str]:
        return [r"[\s\S]*?(<\|channel\|>commentary to=functions\.)[\s\S]*"]


def _body_end(text: str, start: int) -> tuple[int, bool]:
    """Where a message's body ends, and whether its end marker has been written."""
    ends = [found for marker in _ENDS if (found := text.find(marker, start)) >= 0]
    return (min(ends), True) if ends else (len(text), False)
