"""The workers of this worker's model in their order (by seat), and this same request asked of them:
llama-server's slot ids run on from one worker to the next, so /slots reads and acts through here.

A request relayed here from one of them asks for this worker's own part only.
"""

from __future__ import annotations

from flask import Response, request

from app import workers
from app.serving import relay, routing
from app.settings.current import current_config


def rank() -> int:
    """This worker's place among the live workers of its model (0 outside gunicorn)."""
    worker = workers.this_worker()
    return 0 if worker is None else routing.rank(routing.snapshot_of(worker))


def others() -> list[Response]:
    """The answers of the model's other workers to this request (a worker gone meanwhile: none)."""
    worker = workers.this_worker()
    if worker is None or relay.is_relayed(request, worker):
        return []
    snapshot = routing.snapshot_of(worker)
    answers: list[Response] = []
    place = 0
    while (seat := routing.ranked_peer(snapshot, place)) is not None:
        if seat != snapshot.seat:
            answer = relay.to_worker(request, current_config(), worker, seat)
            answers += [] if answer is None else [answer]
        place += 1
    return answers


def at(place: int) -> Response | None:
    """The answer to this request of the worker at `place`; None if there is none there (or this
    request came from another worker, which asks for this one's own part)."""
    worker = workers.this_worker()
    if worker is None or relay.is_relayed(request, worker):
        return None
    seat = routing.ranked_peer(routing.snapshot_of(worker), place)
    return None if seat is None else relay.to_worker(request, current_config(), worker, seat)
