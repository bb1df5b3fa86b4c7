"""One generation loop under every protocol: a presenter turns the chunks into its JSON or its events.

What every protocol shares is handled here once: handing the request to a peer with room,
keep-alives while waiting, figures for the access log, failures, the client hanging up,
a queued request moving to an idle peer, and errors after the 200 (handed to the
presenter, which knows its own shape).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from flask import Response, g, jsonify, request

from app.api.generation import cache_miss, handoff
from app.api.http import sse
from app.api.http.errors import APIError, ServerError, ServiceUnavailableError, from_engine
from app.api.prompting.prompt_places import Locate
from app.engine.engine import Engine
from app.engine.errors import EngineError, QueueFullError, QueueTimeoutError
from app.engine.generation import Generation
from app.engine.types import ChoicePlan, Chunk, TokenLogprob
from app.serving import disconnect, internal, relay
from app.telemetry import adapter_load
from app.telemetry.request_stats import RequestStats

log = logging.getLogger(__name__)


class Presenter(Protocol):
    """How one protocol answers: a whole JSON object, or events; both from the same chunks."""

    def build(self, choices: list[ChoiceResult]) -> dict[str, Any] | list[dict[str, Any]]:
        """The JSON answer, once every choice has finished (llama-server's: a list for several)."""

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """The stream's events as chunks arrive (`None`: nothing for a while, a keep-alive is due)."""

    def failure(self, error: APIError) -> bytes:
        """The event that ends a stream with an error, after its 200 has gone out."""


@dataclass
class ChoiceResult:
    """One choice, gathered from its chunks."""

    index: int
    text: str = ""
    finish_reason: str = "length"
    completion_tokens: int = 0
    cached_tokens: int = 0
    prediction_accepted: int = 0  # tokens of the request's prediction kept as drafts
    stop_sequence: str | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_logprobs: list[TokenLogprob] = field(default_factory=list)  # echo + logprobs

    def add(self, chunk: Chunk) -> None:
        self.text += chunk.text
        self.prompt_logprobs.extend(chunk.prompt_logprobs)
        self.logprobs.extend(chunk.logprobs)
        if chunk.finish_reason is not None:
            self.finish_reason, self.completion_tokens = chunk.finish_reason, chunk.completion_tokens
            self.cached_tokens, self.stop_sequence = chunk.cached_tokens, chunk.stop_sequence
            self.prediction_accepted = chunk.prediction_accepted


def generate(
    engine: Engine,
    streams: bool,
    requests: list[ChoicePlan],
    presenter: Presenter,
    prompt_tokens: int,
    cache_key: str | None = None,
    locate: Locate | None = None,
) -> Response:
    """Generate every choice (here, or on a peer with room): a stream if the request `streams`, else
    one JSON answer. `cache_key`: OpenAI's `prompt_cache_key`, which routes as well as the prompt;
    `locate`: which message a prompt token falls in, to say where a prompt left the cache."""
    if (relayed := handoff.to_peer(engine, requests, cache_key)) is not None:
        return relayed
    stats: RequestStats = g.stats
    call = internal.of(request.environ)
    miss = cache_miss.explained(engine, requests[0].prompt_tokens, requests[0].cache_scope, locate)
    try:
        generation = engine.submit(requests, low_priority=call is not None)
    except QueueFullError:
        stats.rejected = True
        raise
    if call is not None:
        call.generations.append(generation)
    adapter_load.track(generation, requests[0].adapters, lambda: engine.lora_scales)
    generation.on_close(disconnect.watch(request.environ, generation.cancel))
    generation.migrate = handoff.migrator(engine)
    stats.prompt_tokens = prompt_tokens
    if streams:
        # Server-Sent Events, unless the protocol frames its stream otherwise (Ollama's NDJSON).
        framed = getattr(presenter, "stream_response", sse.stream_response)
        response = framed(_stream(generation, stats, presenter))
        response.call_on_close(generation.close)  # even if the client leaves before the first event
    else:
        response = _whole(generation, stats, presenter)
    if miss is not None:
        response.headers[cache_miss.HEADER] = miss
    return response


class HungUp(Exception):  # noqa: N818 - a signal, not an error
    """The client has gone: nothing more is written."""


def chunks(generation: Generation, stats: RequestStats) -> Iterator[Chunk | None]:
    """The generation's chunks for a presenter: figures noted, failures raised, a hang-up ending it."""
    for chunk in generation:
        if stats.queue_wait is None and generation.started_at is not None:
            stats.queue_wait = generation.started_at - generation.submitted_at
            stats.submitted_at, stats.sequence_at = generation.submitted_at, generation.started_at
            adapter_load.started(generation)
        if chunk is not None:
            if chunk.text:
                stats.on_text()
            stats.count_tokens(chunk.index, chunk.completion_tokens)
            stats.cached_tokens = max(stats.cached_tokens, chunk.cached_tokens)
            stats.finish_reason = chunk.finish_reason or stats.finish_reason
            if chunk.finish_reason == "cancelled":
                raise HungUp
            _raise_if_failed(chunk)
        yield chunk


def _raise_if_failed(chunk: Chunk) -> None:
    """Log a generation's failure and turn it into an error that tells the client no internals."""
    if chunk.error:
        log.error("generation failed:\n%s", chunk.error)
        raise ServerError("The server had an error while generating; please retry.")
    if chunk.finish_reason == "kv_full":
        raise ServiceUnavailableError(
            "The server's KV cache filled up while generating this answer (LLM_KV_SIZE); retry shortly.",
            code="kv_cache_full",
        )


def _whole(generation: Generation, stats: RequestStats, presenter: Presenter) -> Response:
    """Wait for every choice, then answer with the presenter's JSON object."""
    results = {r.index: ChoiceResult(r.index) for r in generation.plans}
    try:
        for chunk in chunks(generation, stats):
            if chunk is not None:
                results[chunk.index].add(chunk)
    except QueueTimeoutError:
        stats.rejected = True
        raise
    except relay.Migrated as moved:  # a peer had room while this waited: it answers
        stats.relayed = True
        return moved.response(request.environ)
    except HungUp:
        pass
    if generation.cancelled:  # the client hung up (seen by the disconnect watcher): nobody reads this
        stats.cancelled = True
        return Response(status=499)
    answer = presenter.build([results[i] for i in sorted(results)])
    # JSON, unless the protocol answers otherwise (a transcript as text or subtitles).
    return getattr(presenter, "whole_response", jsonify)(answer)


def _stream(generation: Generation, stats: RequestStats, presenter: Presenter) -> Iterator[bytes]:
    """The presenter's events, after the headers have gone out."""
    ended = False
    try:
        yield from presenter.events(chunks(generation, stats))
        ended = True
    except relay.Migrated as moved:
        # A peer had room while this waited: only keep-alives have gone out, so its events
        # carry on this stream.
        ended = True
        stats.relayed = True
        yield from moved.body()
    except HungUp:
        return
    except (APIError, EngineError) as exc:
        ended = True
        stats.rejected = isinstance(exc, QueueTimeoutError)
        yield presenter.failure(exc if isinstance(exc, APIError) else from_engine(exc))
    finally:
        stats.cancelled = not ended
