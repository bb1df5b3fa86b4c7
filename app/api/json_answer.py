"""The non-streamed answer: every choice's text gathered into one chat or text completion object."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Response, jsonify, request

from app.api import logprobs, tools
from app.api.answer import Answer
from app.api.chunk_accounting import account, raise_if_failed
from app.api.completion_objects import Choice, Shape, usage
from app.engine.errors import QueueTimeoutError
from app.serving import relay
from app.telemetry.request_stats import RequestStats

if TYPE_CHECKING:
    from app.engine.generation import Generation


def whole_answer(generation: Generation, shape: Shape, answer: Answer, stats: RequestStats) -> Response:
    """Wait for every choice to finish, then answer with one JSON object."""
    choices = {r.index: Choice(r.index, answer.prefixes.get(r.index, "")) for r in generation.requests}
    offsets = {i: logprobs.TextLogprobs(len(c.text)) for i, c in choices.items()}
    entries: dict[int, list[Any]] = {i: [] for i in choices}
    completion_tokens = cached_tokens = 0
    try:
        for chunk in generation:
            if chunk is None:
                continue
            raise_if_failed(chunk)
            account(chunk, stats)
            if chunk.finish_reason == "cancelled":
                break
            choice = choices[chunk.index]
            choice.text += chunk.text
            entries[chunk.index].extend(chunk.logprobs)
            if chunk.finish_reason is not None:
                choice.finish_reason = chunk.finish_reason
                completion_tokens += chunk.completion_tokens
                cached_tokens += answer.cached(chunk.index, chunk.cached_tokens)
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
    tokens = usage(answer.prompt_tokens, completion_tokens, cached_tokens)
    return jsonify(shape.completion(list(choices.values()), tokens))
