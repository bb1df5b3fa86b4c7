"""Hand a request's choices to the engine (or to a peer with room) and answer through a presenter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Response, g, request

from app.api import presenting, sse
from app.api.presenting import Presenter
from app.engine.errors import QueueFullError
from app.engine.types import GenerationRequest
from app.serving import disconnect, relay
from app.telemetry.request_stats import RequestStats

if TYPE_CHECKING:
    from app.engine.engine import Engine


def respond(
    engine: Engine,
    body: dict[str, Any],
    requests: list[GenerationRequest],
    presenter: Presenter,
    prompt_tokens: int,
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
    stats.prompt_tokens = prompt_tokens
    if body.get("stream"):
        response = sse.stream_response(presenting.stream(generation, stats, presenter))
        response.call_on_close(generation.close)  # even if the client leaves before the first event
        return response
    return presenting.whole(generation, stats, presenter)
