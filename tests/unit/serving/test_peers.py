"""The table of workers' loads shared through fork, and each worker's private socket."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from app.serving import peers, routing


@pytest.fixture
def table() -> Iterator[peers.PeerTable]:
    shared = peers.PeerTable()
    yield shared
    shared.close()


def test_claimed_slots_are_distinct_and_reused_after_release(table: peers.PeerTable) -> None:
    first, second = table.claim(), table.claim()
    assert first != second
    table.release(first)
    assert table.claim() == first


def test_a_full_table_refuses_another_worker(table: peers.PeerTable) -> None:
    for _ in range(64):
        table.claim()
    with pytest.raises(RuntimeError, match="more than 64 gunicorn workers"):
        table.claim()


def test_the_table_reads_back_what_workers_publish(table: peers.PeerTable) -> None:
    chat, embed, forking = table.claim(0), table.claim(1), table.claim(1)
    assert table.holding() == [0, 1, 1]  # reserved slots count: the master assigns models by them
    table.publish(chat, 1, 4, 0, True, asleep=True)
    table.publish(embed, 3, 4, 1, False)  # still loading its model
    seen = {peer.seat: peer for peer in table.peers()}
    assert (seen[chat].room, seen[chat].ready, seen[chat].model) == (3, True, 0)
    assert seen[chat].asleep and not seen[embed].asleep
    assert (seen[embed].room, seen[embed].ready, seen[embed].model) == (1, False, 1)
    assert not seen[forking].live  # reserved while it forks: no requests go there yet


def test_worker_listens_on_its_own_socket_and_release_removes_it(table: peers.PeerTable) -> None:
    seat = table.claim()
    worker = peers.Worker(table, seat, capacity=4)
    listener = worker.listen()
    try:
        path = table.socket_path(seat)
        assert os.path.dirname(path) == table.rundir
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            accepted, _ = listener.accept()
            accepted.close()
        worker.publish(2)
        other = table.claim()
        assert routing.model_holder(_seen_from(table, other), 0) is None  # not ready: nobody sends it any
        worker.became_ready()
        assert routing.model_holder(_seen_from(table, other), 0) == seat
    finally:
        listener.close()
    table.release(seat)
    assert not os.path.exists(table.socket_path(seat))


def _seen_from(table: peers.PeerTable, seat: int) -> routing.Snapshot:
    return routing.Snapshot(seat, 0, tuple(table.peers()))
