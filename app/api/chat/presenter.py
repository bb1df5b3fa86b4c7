"""Chat and text completions: the whole answer object, or its stream of chunk events ending in [DONE]."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from app.api.chat import logprobs
from app.api.chat.objects import Choice, Shape, usage
from app.api.common import sse, tools
from app.api.common.errors import APIError
from app.api.common.generate import ChoiceResult
from app.engine.types import Chunk


@dataclass
class AnswerOptions:
    """What the request asked of the answer, beyond the chunks themselves."""

    chat: bool
    prompt_tokens: int
    prefixes: dict[int, str] = field(default_factory=dict)  # `echo`: prompt text per choice
    include_usage: bool = False
    tools: list[dict[str, Any]] | None = None  # set when the answer may be tool calls
    tools_forced: bool = False
    choices_per_prompt: int = 1  # `n`

    def cached(self, index: int, cached_tokens: int) -> int:
        """A choice's share of the prompt tokens served from cache: its prompt's, counted once."""
        return cached_tokens if index % self.choices_per_prompt == 0 else 0


class CompletionPresenter:
    """OpenAI's chat.completion / text_completion, and their chunks."""

    def __init__(self, shape: Shape, answer: AnswerOptions, wants_logprobs: bool) -> None:
        self.shape, self.answer, self.wants_logprobs = shape, answer, wants_logprobs

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The non-streamed answer: every choice, tool calls parsed, logprobs shaped."""
        answer, shape = self.answer, self.shape
        choices = []
        for result in results:
            prefix = answer.prefixes.get(result.index, "")
            choice = Choice(result.index, prefix + result.text, result.finish_reason)
            if answer.tools:
                choice.tool_calls, choice.finish_reason = tools.calls_for(
                    result, answer.tools, answer.tools_forced
                )
            if self.wants_logprobs:
                if shape.chat:
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
        return shape.completion(choices, usage(answer.prompt_tokens, completion, cached))

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """Chunk events as the engine's chunks come; a choice that may be a tool call is held to its end."""
        answer, shape = self.answer, self.shape
        extra = {"usage": None} if answer.include_usage else {}
        offsets: dict[int, logprobs.TextLogprobs] = {}
        held: dict[int, ChoiceResult] = {}  # choices that may be tool calls, held until they end
        completion_tokens = cached_tokens = 0
        for chunk in chunks:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            if chunk.index not in offsets:  # a choice opens: chat's role, or the echoed prompt
                prefix = answer.prefixes.get(chunk.index, "")
                offsets[chunk.index] = logprobs.TextLogprobs(len(prefix))
                if shape.chat:
                    yield sse.event(shape.chunk("", index=chunk.index, first=True) | extra)
                elif prefix:
                    scored = None
                    if chunk.prompt_logprobs:  # echo + logprobs: the prompt's, on the echo
                        scored = logprobs.TextLogprobs(0).format(chunk.prompt_logprobs)
                    yield sse.event(shape.chunk(prefix, index=chunk.index, logprobs=scored) | extra)
            if chunk.finish_reason is not None:
                completion_tokens += chunk.completion_tokens
                cached_tokens += answer.cached(chunk.index, chunk.cached_tokens)
            if answer.tools and self._may_be_call(chunk, held):
                if chunk.finish_reason is not None:
                    yield from self._held_events(held.pop(chunk.index), extra)
                continue
            if chunk.text or chunk.logprobs:
                shaped = None
                if self.wants_logprobs:
                    entries = chunk.logprobs
                    shaped = logprobs.chat(entries) if shape.chat else offsets[chunk.index].format(entries)
                yield sse.event(shape.chunk(chunk.text, index=chunk.index, logprobs=shaped) | extra)
            if chunk.finish_reason is not None:
                yield sse.event(shape.chunk(None, chunk.finish_reason, index=chunk.index) | extra)
        if answer.include_usage:
            yield sse.event(shape.usage_chunk(usage(answer.prompt_tokens, completion_tokens, cached_tokens)))
        yield sse.DONE

    def failure(self, error: APIError) -> bytes:
        """After the 200: one unnamed data event, which the openai SDKs raise as APIError."""
        body = error.body()
        body["error"].pop("param")
        return sse.event(body)

    def _may_be_call(self, chunk: Chunk, held: dict[int, ChoiceResult]) -> bool:
        """Hold a choice's text while it may still be a tool call (forced, or starting with `{`)."""
        if chunk.index not in held:
            if not self.answer.tools_forced and not chunk.text.lstrip().startswith("{"):
                return False
            held[chunk.index] = ChoiceResult(chunk.index)
        held[chunk.index].add(chunk)
        return True

    def _held_events(self, result: ChoiceResult, extra: dict[str, Any]) -> Iterator[bytes]:
        """A held choice once it has ended: tool-call deltas if it is calls, else its text."""
        shape, index = self.shape, result.index
        calls, finish_reason = tools.calls_for(result, self.answer.tools or [], self.answer.tools_forced)
        if calls:
            for delta in tools.stream_deltas(calls):
                yield sse.event(shape.chunk(None, index=index, tool_calls=[delta]) | extra)
        elif result.text:
            yield sse.event(shape.chunk(result.text, index=index) | extra)
        yield sse.event(shape.chunk(None, finish_reason, index=index) | extra)
