"""An operator's order to the workers it concerns (/models/unload, /lora-adapters, /sleep, /wake_up):
acted on by this worker itself, sent to each other one over its peer socket as the same route.

A worker receiving such an order (a relayed request) acts on itself alone; `relayed()` tells
a view which of the two it is answering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from flask import request

from app import workers
from app.api.routing import pool
from app.serving import peers, relay
from app.settings.current import current_config


def relayed() -> bool:
    """Whether this request is another worker's order: it acts on this worker alone."""
    return relay.is_relayed(request, workers.this_worker())


def each(chosen: Iterable[peers.Peer], path: str, body: object, here: Callable[[], bool]) -> list[int]:
    """Act here (`here()`; False: refused) if this worker is among `chosen`, and order every other
    one (`path` with the JSON `body`, the client's key with it): the seats that refused or could
    not be reached."""
    me, config = pool.me(), current_config()
    refused = []
    for peer in chosen:
        if peer.seat == me.seat:
            done = here()
        else:
            status, _ = relay.order(me, peer.seat, path, body, pool.key(), config)
            done = status == 200
        if not done:
            refused.append(peer.seat)
    return refused


def unload(index: int) -> list[int]:
    """Unload on-demand model `index` from every worker holding it: the seats that could not (serving)."""
    named = {"model": current_config().models[index].id}
    return each(pool.holding(index), "/models/unload", named, lambda: pool.unload_here(index))


def startup_workers() -> list[peers.Peer]:
    """The live workers whose model is loaded at start-up (not the on-demand pool's)."""
    return [peer for peer in pool.table().peers() if peer.live and not peer.pool]
