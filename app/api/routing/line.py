"""A request's ticket in the line for an on-demand model (app/serving/waiting_line.py), as views use it.

A request that waits for an on-demand model joins the line; it goes to the model's holder
only when its turn comes (routing.first_in_line), carrying its ticket in a header, and the
holder marks the ticket taken as it starts to serve it (`take`), which lets the next go.
"""

from __future__ import annotations

import time

from flask import request

from app import workers
from app.api.http.errors import ServiceUnavailableError
from app.serving import peers, relay, routing
from app.serving.waiting_line import PLACES, Ticket, Waiter, WaitingLine

TICKET_HEADER, TICKET_ENVIRON = "X-LLM-Ticket", "HTTP_X_LLM_TICKET"
TURN = 0.01  # seconds between looks while the model is ready and earlier requests go first


def join(index: int) -> Ticket | None:
    """A ticket for this request, waiting for model `index` (None outside gunicorn, where no one
    else waits); a 503 if this worker already keeps PLACES requests waiting."""
    state = workers.current()
    request.environ.pop(TICKET_ENVIRON, None)  # only the server's own ticket rides along
    if state is None:
        return None
    ticket = state.shared.line.join(state.me.seat, index)
    if ticket is None:
        raise ServiceUnavailableError(
            f"{PLACES} requests already wait on this worker for models loading on demand; retry shortly."
        )
    request.environ[TICKET_ENVIRON] = ticket.header  # relayed with it: the holder takes it
    return ticket


def leave(ticket: Ticket | None) -> None:
    """The request no longer waits (served, refused, or its client gone)."""
    state = workers.current()
    if ticket is not None and state is not None:
        state.shared.line.leave(ticket)


def take() -> None:
    """This worker starts serving a relayed request: its ticket (if it has one) is taken."""
    state = workers.current()
    if state is not None and relay.is_relayed(request, state.me):
        state.shared.line.take(request.headers.get(TICKET_HEADER))


def waiting(line: WaitingLine, snapshot: routing.Snapshot, timeout: float) -> list[Waiter]:
    """The tickets of the live workers in `snapshot` not yet taken; those older than the queue's
    `timeout` are stuck (their worker cannot be reading the line) and wait behind no one."""
    seats = [peer.seat for peer in snapshot.peers if peer.live]
    return line.waiters(seats, time.monotonic() - timeout - 1)


def the_line() -> WaitingLine | None:
    """The server's line (None outside gunicorn)."""
    state = workers.current()
    return None if state is None else state.shared.line


def my_turn(line: WaitingLine | None, worker: peers.Worker, ticket: Ticket | None, timeout: float) -> bool:
    """Whether the request of `ticket` may go to its model's holder now (always, without a ticket).
    Needs no app: a stream waiting for its model asks after its view has returned."""
    if ticket is None or line is None:
        return True
    snapshot = routing.snapshot_of(worker)
    return routing.first_in_line(waiting(line, snapshot, timeout), ticket.model, ticket.arrival)
