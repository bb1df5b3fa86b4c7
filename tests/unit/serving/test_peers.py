"""The table of workers' loads shared through fork, and each worker's private socket."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from app.serving import peers


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


def test_roomiest_peer_skips_itself_and_reserved_slots(table: peers.PeerTable) -> None:
    mine, full, roomy, forking = (table.claim() for _ in range(4))
    assert table.roomiest_peer(mine) is None  # the others are only reserved so far
    table.publish(mine, 4, 4, 0, True)
    table.publish(full, 6, 4, 0, True)  # two choices waiting
    table.publish(roomy, 1, 4, 0, True)
    assert table.roomiest_peer(mine) == (roomy, 3)
    assert table.roomiest_peer(roomy) == (mine, 0)
    table.release(roomy)
    # `forking` holds nothing but is only reserved: the full worker is the one peer.
    assert table.roomiest_peer(mine) == (full, -2)
    table.publish(forking, 0, 8, 0, True)
    assert table.roomiest_peer(mine) == (forking, 8)


def test_peers_are_told_apart_by_model_and_readiness(table: peers.PeerTable) -> None:
    chat, embed, loading = table.claim(0), table.claim(1), table.claim(1)
    assert table.holding() == [0, 1, 1]  # reserved slots count: the master assigns models by them
    table.publish(chat, 0, 4, 0, True)
    table.publish(embed, 3, 4, 1, True)
    table.publish(loading, 0, 4, 1, False)  # still loading its model
    assert table.roomiest_peer(chat, model=1) == (embed, 1)
    assert table.roomiest_peer(embed, model=1) is None
    assert table.roomiest_peer(embed, model=0) == (chat, 4)
    table.publish(loading, 0, 4, 1, True)
    assert table.roomiest_peer(chat, model=1) == (loading, 4)


def test_worker_listens_on_its_own_socket_and_release_removes_it(table: peers.PeerTable) -> None:
    slot = table.claim()
    worker = peers.Worker(table, slot, capacity=4)
    listener = worker.listen()
    try:
        path = table.socket_path(slot)
        assert os.path.dirname(path) == table.rundir
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            accepted, _ = listener.accept()
            accepted.close()
        worker.publish(2)
        other = table.claim()
        assert table.roomiest_peer(other) is None  # not ready yet: nobody sends it requests
        worker.became_ready()
        assert table.roomiest_peer(other) == (slot, 4)
    finally:
        listener.close()
    table.release(slot)
    assert not os.path.exists(table.socket_path(slot))
