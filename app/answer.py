"""Run an admitted request's generations and answer as one JSON object or as an event stream."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Response, current_app, g, jsonify, request

from app import disconnect, logprobs, relay, sse, tools
from app.engine import Engine
from app.errors import APIError, QueueFullError, QueueTimeoutError, ServerError
from app.generation import Chunk, Generation, GenerationRequest
from app.objects import Choice, Shape, usage
from app.requestlog import RequestStats

log = logging.getLogger(__name__)


@dataclass
class Answer:
    """How to present the choices: chat or text, echoed prompts, and tool-call parsing."""

    chat: bool
    prompt_tokens: int
    prefixes: dict[int, str] = field(default_factory=dict)  # `echo`: prompt text per choice
    include_usage: bool = False
    tools: list[dict[str, Any]] | None = None  # set when the answer may be tool calls
    tools_forced: bool = False


def respond(
    engine: Engine, body: dict[str, Any], requests: list[GenerationRequest], answer: Answer
) -> Response:
    """Generate every choice and answer in the format the body's `stream` asks for."""
    stats: RequestStats = g.stats
    relayed = relay.to_idle_peer(request, engine)
    if relayed is not None:
        stats.relayed = True
        return relayed
    try:
        generation = engine.submit(requests)
    except QueueFullError:
        stats.rejected = True
        raise
    generation.on_close(disconnect.watch(request.environ, generation.cancel))
    generation.migrate = relay.migrator(request, engine)
    stats.prompt_tokens = answer.prompt_tokens
    shape = Shape(model=current_app.config["LLM"].model_id, chat=answer.chat)
    if body.get("stream"):
        response = sse.stream_response(_stream(generation, shape, answer, stats))
        response.call_on_close(generation.close)  # even if the client leaves before the first event
        return response
    return _whole(generation, shape, answer, stats)


def _whole(generation: Generation, shape: Shape, answer: Answer, stats: RequestStats) -> Response:
    choices = {r.index: Choice(r.index, answer.prefixes.get(r.index, "")) for r in generation.requests}
    offsets = {i: logprobs.TextLogprobs(len(c.text)) for i, c in choices.items()}
    entries: dict[int, list[Any]] = {i: [] for i in choices}
    completion_tokens = 0
    try:
        for chunk in generation:
            if chunk is None:
                continue
            _raise_if_failed(chunk)
            _account(chunk, stats)
            if chunk.finish_reason == "cancelled":
                break
            choice = choices[chunk.index]
            choice.text += chunk.text
            entries[chunk.index].extend(chunk.logprobs)
            if chunk.finish_reason is not None:
                choice.finish_reason = chunk.finish_reason
                completion_tokens += chunk.completion_tokens
    except QueueTimeoutError:
        stats.rejected = True
        raise
    except relay.Migrated as moved:  # a peer became idle while this waited: it answers
        stats.relayed = True
        return moved.response(request.environ)
    if generation.cancelled:
        # The client hung up (seen by the disconnect watcher); nobody reads this.
        stats.cancelled = True
        return Response(status=499)
    for index, choice in choices.items():
        calls = tools.parse_calls(choice.text, answer.tools) if answer.tools else None
        if calls:
            choice.tool_calls, choice.finish_reason = calls, "tool_calls"
        if generation.requests[0].logprobs is not None:
            choice.logprobs = (
                logprobs.chat(entries[index]) if shape.chat else offsets[index].format(entries[index])
            )
    return jsonify(shape.completion(list(choices.values()), usage(answer.prompt_tokens, completion_tokens)))


def _stream(generation: Generation, shape: Shape, answer: Answer, stats: RequestStats) -> Iterator[bytes]:
    """The SSE events of one request's generations; runs after the headers have gone out."""
    extra = {"usage": None} if answer.include_usage else {}
    wants_logprobs = generation.requests[0].logprobs is not None
    offsets = {
        r.index: logprobs.TextLogprobs(len(answer.prefixes.get(r.index, ""))) for r in generation.requests
    }
    started: set[int] = set()
    held: dict[int, str] = {}  # text of choices that may be tool calls, held until they end
    completion_tokens = 0
    ended = False
    try:
        for chunk in generation:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            _account(chunk, stats)
            if chunk.finish_reason == "cancelled":  # the client has gone: nobody to write to
                return
            _raise_if_failed(chunk)
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
                yield sse.event(shape.chunk(None, chunk.finish_reason, index=chunk.index) | extra)
        if answer.include_usage:
            yield sse.event(shape.usage_chunk(usage(answer.prompt_tokens, completion_tokens)))
        ended = True
        yield sse.DONE
    except relay.Migrated as moved:
        # A peer became idle while this waited: only keep-alives have gone out so far,
        # so its events carry on this stream.
        ended = True
        stats.relayed = True
        yield from moved.body()
    except APIError as exc:
        # The 200 has gone out: the error travels as one unnamed data event, which the
        # openai SDKs raise as APIError, and the stream ends.
        ended = True
        stats.rejected = isinstance(exc, QueueTimeoutError)
        body = exc.body()
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


def _account(chunk: Chunk, stats: RequestStats) -> None:
    """Note when text came and how many tokens each choice has, for the access log and metrics."""
    if chunk.text:
        stats.on_text()
    stats.count_tokens(chunk.index, chunk.completion_tokens)


def _raise_if_failed(chunk: Chunk) -> None:
    """Log a generation's failure and turn it into a 500 that tells the client no internals."""
    if chunk.error:
        log.error("generation failed:\n%s", chunk.error)
        raise ServerError("The server had an error while generating; please retry.")
