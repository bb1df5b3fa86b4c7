"""Fair use of gunicorn's workers: each publishes its load, and a full one hands work to one with room.

A gevent worker whose sequences are all busy still accepts connections, and a
keep-alive connection stays with the worker that accepted it, so without help one
worker can queue requests while another has free sequences. Each worker therefore
publishes its load (choices holding or waiting for a sequence) and its capacity
(sequences) in a table shared by all workers (anonymous shared memory made by the
master before fork), and listens on a private Unix socket; a worker with no free
sequence relays a new request to a peer that has one over that socket (relay.py).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import socket
import struct
import tempfile
from dataclasses import dataclass

_SLOTS = 64  # room for every worker, old and new, during a reload (SIGHUP)
_ENTRY = struct.Struct("qqq")  # pid, load (choices holding or waiting for a sequence), capacity
_RESERVED = -1  # pid of a slot whose worker is being forked


class PeerTable:
    """Per-worker pid and load in memory shared by the master and every worker."""

    def __init__(self) -> None:
        self._memory = mmap.mmap(-1, _SLOTS * _ENTRY.size)  # MAP_SHARED | MAP_ANONYMOUS
        self.rundir = tempfile.mkdtemp(prefix="llm-server-")

    def claim(self) -> int:
        """Master, before fork: reserve the first free slot for the worker about to start."""
        for slot in range(_SLOTS):
            if self._read(slot)[0] == 0:
                self._write(slot, _RESERVED, 0, 0)
                return slot
        raise RuntimeError(f"more than {_SLOTS} gunicorn workers at once")

    def release(self, slot: int) -> None:
        """Master, when a worker has exited: free its slot and remove its socket."""
        self._write(slot, 0, 0, 0)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path(slot))

    def publish(self, slot: int, load: int, capacity: int) -> None:
        """Worker: its load now, and how many sequences it has."""
        self._write(slot, os.getpid(), load, capacity)

    def roomiest_peer(self, slot: int) -> tuple[int, int] | None:
        """(slot, free sequences) of the other live worker with the most room, if any."""
        peers = []
        for other in range(_SLOTS):
            pid, load, capacity = self._read(other)
            if other != slot and pid > 0:  # a live worker, not a reserved or free slot
                peers.append((capacity - load, -other))
        if not peers:
            return None
        room, other = max(peers)
        return -other, room

    def socket_path(self, slot: int) -> str:
        """Where the worker in `slot` listens for relayed requests."""
        return os.path.join(self.rundir, f"worker-{slot}.sock")

    def close(self) -> None:
        """Master, on exit: remove the sockets' directory."""
        shutil.rmtree(self.rundir, ignore_errors=True)

    def _read(self, slot: int) -> tuple[int, int, int]:
        return _ENTRY.unpack_from(self._memory, slot * _ENTRY.size)

    def _write(self, slot: int, pid: int, load: int, capacity: int) -> None:
        _ENTRY.pack_into(self._memory, slot * _ENTRY.size, pid, load, capacity)


@dataclass
class Worker:
    """This process's place in the table."""

    table: PeerTable
    slot: int
    capacity: int = 0  # sequences; 0 until the app has read its settings

    def publish(self, load: int) -> None:
        """Tell the peers how loaded this worker is."""
        self.table.publish(self.slot, load, self.capacity)

    def listen(self) -> socket.socket:
        """The private Unix socket peers relay requests to (a gevent socket once patched)."""
        path = self.table.socket_path(self.slot)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)
        return listener


# Module state on purpose: the master makes the table before fork and each worker
# inherits it through fork, with no other channel between them. Both stay None
# outside gunicorn (tests with Flask's client, a single process).
table: PeerTable | None = None
this_worker: Worker | None = None
