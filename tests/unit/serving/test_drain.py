"""The master's drain: SIGTERM raises the flag; the master stops once no worker has work, or at the grace."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.serving import drain, peers


class Arbiter:
    """The parts of gunicorn's arbiter the drain uses."""

    def __init__(self) -> None:
        self.log = logging.getLogger("test.arbiter")
        self.managed = 0
        self.stopped: list[bool] = []

    def manage_workers(self) -> None:
        self.managed += 1

    def stop(self, graceful: bool = True) -> None:
        self.stopped.append(graceful)


@pytest.fixture
def master() -> Any:
    flag = drain.DrainFlag()
    table = peers.PeerTable()
    seat = table.claim()
    table.publish(seat, load=2, capacity=4, model=0, ready=True)
    arbiter = Arbiter()
    drain.install(arbiter, flag, table, grace=30)
    return arbiter, table, seat, flag


def test_sigterm_raises_the_flag_and_the_master_goes_on_while_work_remains(master: Any) -> None:
    arbiter, _, _, flag = master
    assert not flag.up
    arbiter.handle_term()
    assert flag.up
    arbiter.manage_workers()
    assert arbiter.managed == 1 and arbiter.stopped == []


def test_the_master_stops_once_no_worker_holds_work(master: Any) -> None:
    arbiter, table, seat, _ = master
    arbiter.handle_term()
    table.publish(seat, load=0, capacity=4, model=0, ready=True)
    with pytest.raises(StopIteration):
        arbiter.manage_workers()
    assert arbiter.stopped == []  # gunicorn's own graceful stop follows


def test_past_the_grace_the_workers_stop_at_once(master: Any) -> None:
    arbiter, _, _, flag = master
    arbiter.handle_term()
    flag.begin(now=flag.since - 31)
    with pytest.raises(StopIteration):
        arbiter.manage_workers()
    assert arbiter.stopped == [False]


def test_a_second_sigterm_stops_at_once(master: Any) -> None:
    arbiter, _, _, _ = master
    arbiter.handle_term()
    with pytest.raises(StopIteration):
        arbiter.handle_term()
