"""One answer read in its model's format: reasoning split off, calls parsed, what is left as content."""

from __future__ import annotations

import secrets
import string
import uuid
from dataclasses import dataclass, field

from app.chat_formats import fenced_json, reasoning
from app.chat_formats.base import ChatFormat, Function, Parsed, ToolCall
from app.chat_formats.recipient_calls import GptOss

_ALPHANUMERIC = string.ascii_letters + string.digits


@dataclass
class AnswerReader:
    """How to read one request's answers: its format, the functions it may call, thinking or not."""

    format: ChatFormat
    functions: tuple[Function, ...] = ()  # empty: calls are not looked for
    thinking: bool = False  # split the format's thinking tags off into `reasoning`
    opened: bool = False  # the prompt ended inside the thinking tags
    parallel: bool = True
    forced: bool = False  # the answer must be a call: one cut off before its name still is
    inline_reasoning: bool = False  # llama-server's deepseek-legacy: the thinking stays in content too
    json_answer: bool = False  # JSON under a response format, perhaps ```json fenced (llama-server's)

    @property
    def plain(self) -> bool:
        """True when every answer is all content: nothing to split off or parse."""
        return (
            not self.functions
            and not self.thinking
            and not self.json_answer
            and not isinstance(self.format, GptOss)
        )

    def read(self, text: str, partial: bool) -> Parsed:
        """The answer so far (`partial`) or whole."""
        thought, rest = "", text
        if self.thinking and self.format.thinking_tags:
            thought, rest = reasoning.split(text, self.format.thinking_tags, partial, self.opened)
        if self.functions or isinstance(self.format, GptOss):  # harmony's channels are always markup
            parsed = self.format.parse(rest, partial, self.functions)
            if (
                self.format.starts_bare
                and parsed.calls
                and (_unknown(parsed.calls, self.functions) or parsed.content.strip())
            ):
                parsed = Parsed(content=rest)  # JSON of its own, or prose after it: not calls
        else:
            parsed = Parsed(content=fenced_json.unwrap(rest, partial) if self.json_answer else rest)
        parsed.reasoning = thought + parsed.reasoning
        if self.inline_reasoning:
            parsed.content = text[: len(text) - len(rest)] + parsed.content
        if not partial and self.forced and not parsed.calls and self.functions:
            # Cut off (max_tokens) before the call had a name: a call of the first function,
            # as OpenAI answers a forced call, never plain text.
            parsed.calls, parsed.content = [ToolCall(self.functions[0].name, complete=False)], ""
        if parsed.calls and not partial:
            parsed.content = parsed.content.strip()  # the space around calls is not an answer
        if not self.functions:
            parsed.calls = []
        elif not self.parallel:
            parsed.calls = parsed.calls[:1]
        return parsed

    def new_id(self) -> str:
        """An id for a call: Mistral's templates insist on nine letters and digits when it comes back."""
        if "Mistral" in self.format.name or self.format.name == "Magistral":
            return "".join(secrets.choice(_ALPHANUMERIC) for _ in range(9))
        return "call_" + uuid.uuid4().hex[:24]


def _unknown(calls: list[ToolCall], functions: tuple[Function, ...]) -> bool:
    names = {function.name for function in functions}
    return any(call.name not in names for call in calls)


@dataclass
class Delta:
    """One step of a streamed answer: text, reasoning, a call opening, or a piece of its arguments."""

    kind: str  # "content" | "reasoning" | "call" | "arguments"
    text: str = ""
    index: int = 0  # the call's position among this answer's calls
    id: str = ""
    name: str = ""


@dataclass
class DeltaStream:
    """Turns the growing text of one answer into the deltas not yet sent, in order."""

    reader: AnswerReader
    ids: list[str] = field(default_factory=list)
    _sent: dict[str, str] = field(default_factory=lambda: {"content": "", "reasoning": ""})
    _arguments: list[str] = field(default_factory=list)
    last: Parsed = field(default_factory=Parsed)  # the latest reading

    def update(self, text: str, final: bool) -> list[Delta]:
        """The deltas that `text` (the whole answer so far) adds to what has been sent."""
        parsed = self.last = self.reader.read(text, partial=not final)
        deltas = [
            d for d in (self._grow("reasoning", parsed.reasoning), self._grow("content", parsed.content)) if d
        ]
        for index, call in enumerate(parsed.calls):
            if index == len(self.ids):
                self.ids.append(self.reader.new_id())
                self._arguments.append("")
                deltas.append(Delta("call", index=index, id=self.ids[index], name=call.name))
            sent = self._arguments[index]
            if call.arguments.startswith(sent) and len(call.arguments) > len(sent):
                deltas.append(Delta("arguments", call.arguments[len(sent) :], index=index))
                self._arguments[index] = call.arguments
        return deltas

    def _grow(self, kind: str, now: str) -> Delta | None:
        # A later reading extends an earlier one: what could still change was held back.
        sent = self._sent[kind]
        if len(now) > len(sent) and now.startswith(sent):
            self._sent[kind] = now
            return Delta(kind, now[len(sent) :])
        return None
