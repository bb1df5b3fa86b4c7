"""The prompt-aware hand-off, asked once per generation: another worker of the same model answers
instead when its cache holds more of the prompt, when it holds the request's `prompt_cache_key`,
or when it is idle and this one is not (app/serving/relay.py carries it, app/serving/routing.py
decides); and, once queued here, the request may still move to a worker that frees up first.

The front (app/api/routing/front.py) has already picked a worker holding the model; this is the
second question, which only the planned prompt can answer.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, g, request

from app import workers
from app.engine.engine import Engine
from app.engine.types import ChoicePlan
from app.serving import relay


def to_peer(engine: Engine, requests: list[ChoicePlan], cache_key: str | None) -> Response | None:
    """A peer's answer to the request, when one should serve it; None to generate here."""
    state = workers.current()
    me, board = (state.me, state.shared.prefixes) if state is not None else (None, None)
    prompt, scope = requests[0].prompt_tokens, requests[0].cache_scope
    relayed = (
        relay.to_cached_peer(request, engine, prompt, scope, me, board)
        or relay.to_keyed_peer(request, engine, prompt, scope, cache_key, me, board)
        or relay.to_idle_peer(request, engine, me)
    )
    if relayed is not None:
        g.stats.relayed = True
    return relayed


def migrator(engine: Engine) -> Callable[[], None] | None:
    """How a request still queued here moves to a peer that frees up first (None: it cannot)."""
    state = workers.current()
    return relay.migrator(request, engine, state.me if state is not None else None)
