"""The request flow both completion endpoints share: parse, plan, generate, respond."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from flask import Response, current_app, g, jsonify, request
from marshmallow import Schema
from werkzeug.exceptions import BadRequest

from app import disconnect, relay, sse
from app.engine import Engine
from app.errors import (
    APIError,
    ContextLengthError,
    InvalidRequestError,
    ModelNotFoundError,
    NotAcceptableError,
    QueueFullError,
    QueueTimeoutError,
    ServerError,
    ServiceUnavailableError,
)
from app.generation import Generation, GenerationRequest, Sampling
from app.objects import Shape, usage
from app.requestlog import RequestStats

log = logging.getLogger(__name__)

_OFFERED = ["application/json", "text/event-stream"]
_SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
)


def engine() -> Engine:
    """This worker's engine, ready to generate (or a 503)."""
    the_engine: Engine = current_app.extensions["engine"]
    if not the_engine.wait_ready(timeout=current_app.config["LLM"].timeout):
        raise ServiceUnavailableError("The model is not loaded yet; retry shortly.")
    return the_engine


def parse_body(schema: Schema) -> dict[str, Any]:
    """The JSON object body, validated by `schema`, and naming the served model."""
    check_accept()
    try:
        body = request.get_json(force=True)
    except BadRequest:
        raise InvalidRequestError("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    data: dict[str, Any] = schema.load(body)
    served = current_app.config["LLM"].model_id
    if data.get("model") not in (None, served):
        raise ModelNotFoundError(
            f"The model '{data['model']}' does not exist; this server serves '{served}'.",
            param="model",
        )
    return data


def check_accept() -> None:
    """Refuse an Accept header that admits neither answer; the body's `stream` alone picks one."""
    if request.headers.get("Accept", "").strip() and not request.accept_mimetypes.best_match(_OFFERED):
        raise NotAcceptableError(
            "This endpoint answers application/json or text/event-stream; the Accept header admits neither."
        )


def plan(
    body: dict[str, Any], prompt_tokens: list[int], *, prompt_param: str, max_param: str = "max_tokens"
) -> GenerationRequest:
    """Decide max_tokens and sampling, refusing what cannot fit the context before any byte is sent."""
    config = current_app.config["LLM"]
    # `max_completion_tokens` is OpenAI's newer name; errors name the field the client sent.
    if body.get(max_param) is None:
        max_param = "max_tokens"
    asked = body.get(max_param)
    if asked is not None and asked > config.max_tokens_limit:
        raise InvalidRequestError(
            f"{max_param} is {asked}, above this server's limit of {config.max_tokens_limit}.",
            param=max_param,
        )
    room = config.n_ctx - len(prompt_tokens)
    max_tokens = asked or min(config.default_max_tokens or room, config.max_tokens_limit, room)
    if room < 1 or max_tokens > room:
        raise ContextLengthError(
            f"This model's maximum context length is {config.n_ctx} tokens. However, you "
            f"requested {len(prompt_tokens) + max(max_tokens, 1)} tokens "
            f"({len(prompt_tokens)} in the {prompt_param}, {max(max_tokens, 1)} in the "
            f"completion). Please reduce the length of the {prompt_param} or completion.",
            param=prompt_param if asked is None else max_param,
        )
    sampling = Sampling(**{k: body[k] for k in _SAMPLING_FIELDS if body.get(k) is not None})
    return GenerationRequest(prompt_tokens, max_tokens, sampling, body.get("stop") or [])


def respond(
    body: dict[str, Any], gen_request: GenerationRequest, *, chat: bool, prefix: str = ""
) -> Response:
    """Run the generation and answer as one JSON object or as an event stream."""
    the_engine = engine()
    stats = g.stats
    relayed = relay.to_idle_peer(request, the_engine)
    if relayed is not None:
        stats.relayed = True
        return relayed
    try:
        generation = the_engine.submit(gen_request)
    except QueueFullError:
        stats.rejected = True
        raise
    stats.prompt_tokens = len(gen_request.prompt_tokens)
    generation.on_close(disconnect.watch(request.environ, generation.cancel))
    shape = Shape(model=current_app.config["LLM"].model_id, chat=chat)
    prompt_count = len(gen_request.prompt_tokens)
    if body.get("stream"):
        options = body.get("stream_options") or {}
        response = sse.stream_response(
            _stream(generation, shape, prompt_count, bool(options.get("include_usage")), prefix, stats)
        )
        # Runs even when the client leaves before the stream's first event.
        response.call_on_close(generation.close)
        return response
    text, last = prefix, None
    try:
        for chunk in generation:
            if chunk is None:
                continue
            _raise_if_failed(chunk)
            _account(chunk, stats)
            text, last = text + chunk.text, chunk
    except QueueTimeoutError:
        stats.rejected = True
        raise
    if last is None or last.finish_reason == "cancelled":
        # The client hung up (seen by the disconnect watcher); nobody reads this.
        stats.cancelled = True
        return Response(status=499)
    return jsonify(shape.completion(text, last.finish_reason, usage(prompt_count, last.completion_tokens)))


def _stream(
    generation: Generation,
    shape: Shape,
    prompt_count: int,
    include_usage: bool,
    prefix: str,
    stats: RequestStats,
) -> Iterator[bytes]:
    """The SSE events of one generation; runs after the headers have gone out."""
    extra = {"usage": None} if include_usage else {}
    ended = False
    try:
        if shape.chat:
            yield sse.event(shape.chunk("", first=True) | extra)
        elif prefix:  # `echo`: the prompt comes first
            yield sse.event(shape.chunk(prefix) | extra)
        for chunk in generation:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            if chunk.finish_reason == "cancelled":  # the client has gone: nobody to write to
                return
            _raise_if_failed(chunk)
            _account(chunk, stats)
            yield from _chunk_events(chunk, shape, prompt_count, include_usage, extra)
        ended = True
        yield sse.DONE
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


def _account(chunk: Any, stats: RequestStats) -> None:
    """Note timing and token counts of a chunk for the access log and metrics."""
    if chunk.text:
        stats.on_text()
    if chunk.finish_reason is not None:
        stats.completion_tokens = chunk.completion_tokens


def _chunk_events(
    chunk: Any, shape: Shape, prompt_count: int, include_usage: bool, extra: dict[str, Any]
) -> Iterator[bytes]:
    """The events one engine chunk becomes: its text, and at the end the finish and usage."""
    if chunk.text:
        yield sse.event(shape.chunk(chunk.text) | extra)
    if chunk.finish_reason is not None:
        yield sse.event(shape.chunk(None, chunk.finish_reason) | extra)
        if include_usage:
            yield sse.event(shape.usage_chunk(usage(prompt_count, chunk.completion_tokens)))


def _raise_if_failed(chunk: Any) -> None:
    """Log a generation's failure and turn it into a 500 that tells the client no internals."""
    if chunk.error:
        log.error("generation failed:\n%s", chunk.error)
        raise ServerError("The server had an error while generating; please retry.")
