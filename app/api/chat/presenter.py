"""Chat and text completions: the whole answer object, or its stream of chunk events ending in [DONE]."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from app.api.chat.objects import FinishedChoice, ObjectHeader, usage
from app.api.generation import logprobs, timings
from app.api.generation.loop import ChoiceResult
from app.api.http import sse
from app.api.http.errors import APIError
from app.api.prompting import tools
from app.chat_formats.answer import AnswerReader, Delta, DeltaStream
from app.engine.types import Chunk, TokenLogprob


@dataclass
class CompletionOptions:
    """What the request asked of the answer, beyond the chunks themselves."""

    chat: bool
    prompt_tokens: int
    prefixes: dict[int, str] = field(default_factory=dict)  # `echo`: prompt text per choice
    include_usage: bool = False
    reader: AnswerReader | None = None  # chat: how the model writes calls and reasoning
    choices_per_prompt: int = 1  # `n`
    timings_per_token: bool = False  # llama-server's: `timings` on every chunk, not only the last
    prediction_tokens: int = 0  # OpenAI's predicted output, as tokens (0: none given)

    def usage(self, completion_tokens: int, cached_tokens: int, accepted: int) -> dict[str, Any]:
        """OpenAI's usage; with a prediction, how many of its tokens the choices kept, and the rest
        (per choice: each choice is drafted from the whole prediction)."""
        tokens = usage(self.prompt_tokens, completion_tokens, cached_tokens)
        if self.prediction_tokens:
            rejected = self.prediction_tokens * self.choices_per_prompt - accepted
            tokens["completion_tokens_details"] = {
                "accepted_prediction_tokens": accepted, "rejected_prediction_tokens": max(rejected, 0),
            }  # fmt: skip
        return tokens

    def cached(self, index: int, cached_tokens: int) -> int:
        """A choice's share of the prompt tokens served from cache: its prompt's, counted once."""
        return cached_tokens if index % self.choices_per_prompt == 0 else 0

    @property
    def parsing(self) -> bool:
        """Whether answers are read for calls or reasoning rather than passed on as they come."""
        return self.reader is not None and not self.reader.plain


class CompletionPresenter:
    """OpenAI's chat.completion / text_completion, and their chunks."""

    def __init__(self, header: ObjectHeader, answer: CompletionOptions, wants_logprobs: bool) -> None:
        self.header, self.answer, self.wants_logprobs = header, answer, wants_logprobs
        self.stats = timings.current()  # kept: a stream's events are made outside the request's context

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The non-streamed answer: every choice, tool calls and reasoning parsed, logprobs shaped."""
        answer, header = self.answer, self.header
        choices = []
        for result in results:
            prefix = answer.prefixes.get(result.index, "")
            choice = FinishedChoice(result.index, prefix + result.text, result.finish_reason)
            if answer.parsing and answer.reader is not None:
                parsed = answer.reader.read(result.text, partial=False)
                choice.text, choice.reasoning = parsed.content, parsed.reasoning
                if parsed.calls:
                    choice.tool_calls = tools.openai_calls(parsed, answer.reader)
                    choice.finish_reason = tools.finish_reason(parsed, result.finish_reason)
            if self.wants_logprobs:
                if header.chat:
                    choice.logprobs = logprobs.chat(result.logprobs)
                elif result.prompt_logprobs:  # echo + logprobs: the prompt's tokens come first
                    choice.logprobs = logprobs.TextLogprobs(0).format(
                        result.prompt_logprobs + result.logprobs
                    )
                else:
                    choice.logprobs = logprobs.TextLogprobs(len(prefix)).format(result.logprobs)
            choices.append(choice)
        completion = sum(r.completion_tokens for r in results)
        cached = sum(answer.cached(r.index, r.cached_tokens) for r in results)
        accepted = sum(r.prediction_accepted for r in results)
        whole = header.completion(choices, answer.usage(completion, cached, accepted))
        return whole | {"timings": timings.of_request(answer.prompt_tokens, self.stats)}  # as llama-server's

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """Chunk events as the engine's chunks come, each choice's last with llama-server's `timings`
        (or the usage chunk, which ends the stream, when asked for)."""
        last_of_choice = not self.answer.include_usage
        for event in self._events(chunks):
            if isinstance(event, dict):
                closes = any(c.get("finish_reason") for c in event["choices"]) and last_of_choice
                # As llama-server's: per token, every chunk but a choice's opening one (its role).
                opens = any("role" in c.get("delta", {}) for c in event["choices"])
                if closes or bool(event.get("usage")) or (self.answer.timings_per_token and not opens):
                    event = event | {"timings": timings.of_request(self.answer.prompt_tokens, self.stats)}
                event = sse.event(event)
            yield event

    def _events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes | dict[str, Any]]:
        """The stream's events: chunk objects, and keep-alives and [DONE] as bytes; a chat answer read
        for calls streams as it is read."""
        answer, header = self.answer, self.header
        extra = {"usage": None} if answer.include_usage else {}
        offsets: dict[int, logprobs.TextLogprobs] = {}
        readings: dict[int, _Reading] = {}
        completion_tokens = cached_tokens = accepted = 0
        for chunk in chunks:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            if chunk.progress is not None:  # as llama-server's: a chunk with the role, and the figures
                opening = header.chunk(None if header.chat else "", index=chunk.index, first=True)
                yield opening | extra | {"prompt_progress": asdict(chunk.progress)}
                continue
            if chunk.index not in offsets:  # a choice opens: chat's role, or the echoed prompt
                prefix = answer.prefixes.get(chunk.index, "")
                offsets[chunk.index] = logprobs.TextLogprobs(len(prefix))
                if header.chat:
                    yield header.chunk("", index=chunk.index, first=True) | extra
                elif prefix:
                    scored = None
                    if chunk.prompt_logprobs:  # echo + logprobs: the prompt's, on the echo
                        scored = logprobs.TextLogprobs(0).format(chunk.prompt_logprobs)
                    yield header.chunk(prefix, index=chunk.index, logprobs=scored) | extra
            if chunk.finish_reason is not None:
                completion_tokens += chunk.completion_tokens
                cached_tokens += answer.cached(chunk.index, chunk.cached_tokens)
                accepted += chunk.prediction_accepted
            if answer.parsing and answer.reader is not None:
                reading = readings.setdefault(chunk.index, _Reading(DeltaStream(answer.reader)))
                yield from (e | extra for e in self._read_events(chunk, reading))
                continue
            if chunk.text or chunk.logprobs:
                shaped = None
                if self.wants_logprobs:
                    entries = chunk.logprobs
                    shaped = logprobs.chat(entries) if header.chat else offsets[chunk.index].format(entries)
                yield header.chunk(chunk.text, index=chunk.index, logprobs=shaped) | extra
            if chunk.finish_reason is not None:
                yield header.chunk(None, chunk.finish_reason, index=chunk.index) | extra
        if answer.include_usage:
            yield header.usage_chunk(answer.usage(completion_tokens, cached_tokens, accepted))
        yield sse.DONE

    def failure(self, error: APIError) -> bytes:
        """After the 200: one unnamed data event, which the openai SDKs raise as APIError."""
        body = error.body()
        body["error"].pop("param")
        return sse.event(body)

    def _read_events(self, chunk: Chunk, reading: _Reading) -> Iterator[dict[str, Any]]:
        """The chunks one engine chunk adds once the answer so far is read: text held back only
        while it may be markup, calls as OpenAI's tool-call deltas (id and name, then arguments)."""
        header, index = self.header, chunk.index
        reading.text += chunk.text
        reading.logprobs.extend(chunk.logprobs)
        final = chunk.finish_reason is not None
        deltas = reading.stream.update(reading.text, final)
        for delta in deltas:
            if delta.kind == "content":
                yield header.chunk(delta.text, index=index, logprobs=self._pending(reading))
            elif delta.kind == "reasoning":
                yield header.chunk(None, index=index, reasoning=delta.text)
            else:
                yield header.chunk(None, index=index, tool_calls=[_call_delta(delta)])
        if final:
            reason = tools.finish_reason(reading.stream.last, chunk.finish_reason or "stop")
            yield header.chunk(None, reason, index=index, logprobs=self._pending(reading))

    def _pending(self, reading: _Reading) -> dict[str, Any] | None:
        if not self.wants_logprobs or not reading.logprobs:
            return None
        shaped, reading.logprobs = logprobs.chat(reading.logprobs), []
        return shaped


@dataclass
class _Reading:
    """One streamed choice being read: its text so far and the logprobs not yet sent."""

    stream: DeltaStream
    text: str = ""
    logprobs: list[TokenLogprob] = field(default_factory=list)


def _call_delta(delta: Delta) -> dict[str, Any]:
    if delta.kind == "call":
        return {
            "index": delta.index,
            "id": delta.id,
            "type": "function",
            "function": {"name": delta.name, "arguments": ""},
        }
    return {"index": delta.index, "function": {"arguments": delta.text}}
