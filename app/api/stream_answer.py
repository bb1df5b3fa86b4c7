"""The streamed answer: engine chunks turned into OpenAI chunk events, tool calls and usage included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.api import logprobs, sse, tools
from app.api.answer import Answer
from app.api.chunk_accounting import account, raise_if_failed
from app.api.completion_objects import Shape, usage
from app.api.errors import APIError, from_engine
from app.engine.errors import EngineError, QueueTimeoutError
from app.engine.types import Chunk
from app.serving import relay
from app.telemetry.request_stats import RequestStats

if TYPE_CHECKING:
    from app.engine.generation import Generation


def stream_events(
    generation: Generation, shape: Shape, answer: Answer, stats: RequestStats
) -> Iterator[bytes]:
    """The SSE events of one request's generations; runs after the headers have gone out."""
    extra = {"usage": None} if answer.include_usage else {}
    wants_logprobs = generation.requests[0].logprobs is not None
    offsets = {
        r.index: logprobs.TextLogprobs(len(answer.prefixes.get(r.index, ""))) for r in generation.requests
    }
    started: set[int] = set()
    held: dict[int, str] = {}  # text of choices that may be tool calls, held until they end
    completion_tokens = cached_tokens = 0
    ended = False
    try:
        for chunk in generation:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            account(chunk, stats)
            if chunk.finish_reason == "cancelled":  # the client has gone: nobody to write to
                return
            raise_if_failed(chunk)
            if chunk.index not in started:  # a choice opens: chat's role, or the echoed prompt
                started.add(chunk.index)
                if shape.chat:
                    yield sse.event(shape.chunk("", index=chunk.index, first=True) | extra)
                elif answer.prefixes.get(chunk.index):
                    yield sse.event(shape.chunk(answer.prefixes[chunk.index], index=chunk.index) | extra)
            if answer.tools and _may_be_call(chunk, held, answer):
                if chunk.finish_reason is None:
                    continue
                yield from _held_events(shape, chunk, held.pop(chunk.index, ""), answer, extra)
                completion_tokens += chunk.completion_tokens
                cached_tokens += answer.cached(chunk.index, chunk.cached_tokens)
                continue
            if chunk.text or chunk.logprobs:
                shaped = None
                if wants_logprobs:
                    shaped = (
                        logprobs.chat(chunk.logprobs)
                        if shape.chat
                        else offsets[chunk.index].format(chunk.logprobs)
                    )
                yield sse.event(shape.chunk(chunk.text, index=chunk.index, logprobs=shaped) | extra)
            if chunk.finish_reason is not None:
                completion_tokens += chunk.completion_tokens
                cached_tokens += answer.cached(chunk.index, chunk.cached_tokens)
                yield sse.event(shape.chunk(None, chunk.finish_reason, index=chunk.index) | extra)
        if answer.include_usage:
            yield sse.event(shape.usage_chunk(usage(answer.prompt_tokens, completion_tokens, cached_tokens)))
        ended = True
        yield sse.DONE
    except relay.Migrated as moved:
        # A peer became idle while this waited: only keep-alives have gone out so far,
        # so its events carry on this stream.
        ended = True
        stats.relayed = True
        yield from moved.body()
    except (APIError, EngineError) as exc:
        # The 200 has gone out: the error travels as one unnamed data event, which the
        # openai SDKs raise as APIError, and the stream ends.
        ended = True
        stats.rejected = isinstance(exc, QueueTimeoutError)
        error = exc if isinstance(exc, APIError) else from_engine(exc)
        body = error.body()
        body["error"].pop("param")
        yield sse.event(body)
    finally:
        stats.cancelled = not ended


def _may_be_call(chunk: Chunk, held: dict[int, str], answer: Answer) -> bool:
    """Hold a choice's text while it may still be a tool call (forced, or starting with `{`)."""
    if chunk.index in held or answer.tools_forced:
        held[chunk.index] = held.get(chunk.index, "") + chunk.text
        return True
    if not chunk.text.strip():
        return False
    if chunk.text.lstrip().startswith("{"):
        held[chunk.index] = chunk.text
        return True
    return False


def _held_events(
    shape: Shape, last: Chunk, text: str, answer: Answer, extra: dict[str, Any]
) -> Iterator[bytes]:
    """A held choice once it has ended: tool-call deltas if it parses as calls, else its text."""
    calls = tools.parse_calls(text, answer.tools or [])
    if calls:
        for delta in tools.stream_deltas(calls):
            yield sse.event(shape.chunk(None, index=last.index, tool_calls=[delta]) | extra)
        yield sse.event(shape.chunk(None, "tool_calls", index=last.index) | extra)
        return
    if text:
        yield sse.event(shape.chunk(text, index=last.index) | extra)
    yield sse.event(shape.chunk(None, last.finish_reason, index=last.index) | extra)
