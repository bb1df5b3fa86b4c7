"""Hand an OpenAI request's choices to the engine (or to an idle peer) and answer as JSON or a stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Response, current_app, g, request

from app.api import sse
from app.api.answer import Answer
from app.api.completion_objects import Shape
from app.api.json_answer import whole_answer
from app.api.stream_answer import stream_events
from app.engine.errors import QueueFullError
from app.engine.types import GenerationRequest
from app.serving import disconnect, relay
from app.telemetry.request_stats import RequestStats

if TYPE_CHECKING:
    from app.engine.engine import Engine


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
        response = sse.stream_response(stream_events(generation, shape, answer, stats))
        response.call_on_close(generation.close)  # even if the client leaves before the first event
        return response
    return whole_answer(generation, shape, answer, stats)
