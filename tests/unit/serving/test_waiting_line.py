"""The line of requests waiting for on-demand models: shared tickets, and the order routing reads."""

from __future__ import annotations

import os
import time

import pytest

from app.serving import routing
from app.serving.peers import Peer
from app.serving.waiting_line import PLACES, Waiter, WaitingLine
from app.settings.models import POOL

LONG_AGO_MS = int(time.monotonic() * 1000) - 60_000


def everyone(line: WaitingLine) -> list[Waiter]:
    return line.waiters([0, 1, 2], newer_than=0)


def test_a_ticket_waits_until_its_server_takes_it_and_its_place_is_reused_after_it_leaves() -> None:
    line = WaitingLine(3)
    first, second = line.join(1, 7), line.join(2, 7)
    assert first is not None and second is not None and first.arrival < second.arrival
    assert everyone(line) == [Waiter(7, first.arrival), Waiter(7, second.arrival)]
    line.take(first.header)  # the holder starts serving it
    assert everyone(line) == [Waiter(7, second.arrival)]
    line.leave(first)
    again = line.join(1, 8)
    assert again is not None and again.place == first.place  # the place is free again...
    assert Waiter(8, again.arrival) in everyone(line)  # ...and the old mark does not take the new ticket


@pytest.mark.parametrize(
    "header",
    [None, "", "x", "1.0", "1.0.5", "99.0.1", "-1.0.1", f"1.{PLACES}.1", "1.0.0", "1.0.1.2", "1.0.abc"],
)
def test_a_header_that_is_not_a_live_ticket_takes_nothing(header: str | None) -> None:
    line = WaitingLine(3)
    ticket = line.join(1, 4)
    assert ticket is not None
    line.take(header)  # a client's own header, a stale or malformed one
    assert everyone(line) == [Waiter(4, ticket.arrival)]


def test_a_full_row_gives_no_ticket_and_other_rows_are_untouched() -> None:
    line = WaitingLine(2)
    tickets = [line.join(0, 1) for _ in range(PLACES)]
    assert all(tickets) and line.join(0, 1) is None
    assert line.join(1, 1) is not None


def test_tickets_of_an_exited_worker_and_stuck_ones_wait_behind_no_one() -> None:
    line = WaitingLine(3)
    stuck = line.join(0, 5)
    assert stuck is not None
    time.sleep(0.01)
    fresh = line.join(1, 5)
    assert fresh is not None
    assert line.waiters([0, 1], newer_than=fresh.arrival / 1e9 - 0.001) == [Waiter(5, fresh.arrival)]
    line.clear(1)  # the master, once that worker has exited
    assert everyone(line) == [Waiter(5, stuck.arrival)]


def test_the_line_is_shared_with_forked_workers() -> None:
    line = WaitingLine(2)
    pid = os.fork()
    if pid == 0:  # a worker: joins, and exits
        line.join(1, 3)
        os._exit(0)
    os.waitpid(pid, 0)
    assert [waiter.model for waiter in line.waiters([0, 1], newer_than=0)] == [3]


def pool(seat: int, model: int = POOL, ready: bool = True, load: int = 0, used: int = LONG_AGO_MS) -> Peer:
    return Peer(seat, seat + 100, load, 2, model, ready, True, used)


@pytest.mark.parametrize(
    ("line", "model", "arrival", "goes"),
    [
        ([], 3, 10, True),  # no one waits
        ([Waiter(3, 10)], 3, 10, True),  # its own ticket only
        ([Waiter(3, 5), Waiter(3, 10)], 3, 10, False),  # an earlier one for the same model goes first
        ([Waiter(4, 5), Waiter(3, 10)], 3, 10, True),  # an earlier one for another model does not count
        ([Waiter(3, 10), Waiter(3, 20)], 3, 10, True),  # a later one waits behind it
    ],
)
def test_a_request_goes_to_its_holder_when_every_earlier_request_for_its_model_has(
    line: list[Waiter], model: int, arrival: int, goes: bool
) -> None:
    assert routing.first_in_line(line, model, arrival) is goes


def test_models_load_in_the_order_of_their_oldest_waiting_request() -> None:
    line = [Waiter(5, 30), Waiter(4, 20), Waiter(5, 10), Waiter(6, 40), Waiter(2, 1)]
    assert routing.load_order([pool(1, model=2)], line) == [5, 4, 6]  # model 2 is held already


@pytest.mark.parametrize(
    ("peers", "model", "line", "seat"),
    [
        # One worker free, two models waiting: the one asked for first takes it, the other waits.
        ((pool(1),), 4, [Waiter(4, 10), Waiter(5, 20)], 1),
        ((pool(1),), 5, [Waiter(4, 10), Waiter(5, 20)], None),
        # Two free: each takes its own (the first the first, the next the next).
        ((pool(1), pool(2, model=9)), 5, [Waiter(4, 10), Waiter(5, 20)], 2),
        # A model requests wait for is not evicted, however long it has been idle.
        ((pool(1, model=9),), 4, [Waiter(9, 5), Waiter(4, 10)], None),
        # An operator's load (no ticket) comes after every waiting request's.
        ((pool(1),), 6, [Waiter(4, 10)], None),
        ((pool(1), pool(2)), 6, [Waiter(4, 10)], 2),
    ],
)
def test_a_free_pool_worker_goes_to_the_model_first_in_line(
    peers: tuple[Peer, ...], model: int, line: list[Waiter], seat: int | None
) -> None:
    assert routing.loader_for(routing.Snapshot(0, 0, peers), model, None, line) == seat
