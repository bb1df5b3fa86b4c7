"""Requests waiting for an on-demand model, as tickets in arrival order, in memory shared by all workers.

While a model loads on demand, requests for it wait in several workers at once, each
looking at the peer table in its own rhythm; without a line, whichever looks first after
the load goes first. So a waiting request holds a ticket: its model and its arrival time
(CLOCK_MONOTONIC, one clock for every process on the machine), in its worker's row.
routing.py decides by the tickets (the model whose oldest ticket is oldest loads first; a
request goes to its model's holder once every older ticket for that model has been taken),
and the worker that serves a ticket marks it taken.

One writer per cell, as the other shared boards: a ticket's arrival cell is written by its
own worker (join, leave), its taken cell by the one worker that serves it (take), and a
worker's row is cleared by the master when that worker exits.
"""

from __future__ import annotations

import mmap
import time
from dataclasses import dataclass

import numpy as np

PLACES = 256  # tickets per worker: requests one worker can keep waiting for on-demand models


@dataclass(frozen=True)
class Ticket:
    """One waiting request's place in the line."""

    seat: int  # its worker's seat in the peer table
    place: int
    model: int
    arrival: int  # CLOCK_MONOTONIC nanoseconds

    @property
    def header(self) -> str:
        """What a relayed request carries, so that the worker serving it can mark it taken."""
        return f"{self.seat}.{self.place}.{self.arrival}"


@dataclass(frozen=True)
class Waiter:
    """A ticket as routing sees it: which model, since when."""

    model: int
    arrival: int


class WaitingLine:
    """Per worker seat, PLACES tickets: (model, arrival) written by their worker, taken by their server."""

    def __init__(self, seats: int) -> None:
        self._memory = mmap.mmap(
            -1, seats * PLACES * 8 * 3
        )  # MAP_SHARED | MAP_ANONYMOUS: shared through fork
        cells = np.frombuffer(self._memory, dtype=np.int64).reshape(3, seats, PLACES)
        self._model, self._arrival, self._taken = cells[0], cells[1], cells[2]
        self._seats = seats

    def join(self, seat: int, model: int) -> Ticket | None:
        """A ticket for a request of the worker in `seat` waiting for `model`; None if its row is full."""
        free = np.flatnonzero(self._arrival[seat] == 0)
        if not free.size:
            return None
        place, arrival = int(free[0]), time.monotonic_ns()
        self._model[seat, place] = model
        self._arrival[seat, place] = arrival  # last: a reader never sees a ticket without its model
        return Ticket(seat, place, model, arrival)

    def leave(self, ticket: Ticket) -> None:
        """The request is over (served, refused or gone): its place is free again."""
        if self._arrival[ticket.seat, ticket.place] == ticket.arrival:
            self._arrival[ticket.seat, ticket.place] = 0

    def take(self, header: str | None) -> None:
        """The worker serving a relayed request marks its ticket (`Ticket.header`) taken: the next in
        line may go. Anything else in the header (a client's own, a stale ticket) changes nothing."""
        try:
            seat, place, arrival = (int(part) for part in (header or "").split("."))
        except ValueError:
            return
        if (
            0 <= seat < self._seats
            and 0 <= place < PLACES
            and arrival
            and self._arrival[seat, place] == arrival
        ):
            self._taken[seat, place] = arrival

    def waiters(self, seats: list[int], newer_than: float) -> list[Waiter]:
        """Every ticket of the workers in `seats` not yet taken, that arrived after `newer_than` (a
        CLOCK_MONOTONIC time in seconds: older tickets are stuck, and wait behind no one)."""
        arrival, taken, model = self._arrival[seats], self._taken[seats], self._model[seats]
        waiting = (arrival > int(newer_than * 1e9)) & (taken != arrival)
        return [Waiter(int(m), int(a)) for m, a in zip(model[waiting], arrival[waiting], strict=True)]

    def clear(self, seat: int) -> None:
        """Master, when a worker has exited: its requests went with it."""
        self._arrival[seat, :] = 0
        self._taken[seat, :] = 0
