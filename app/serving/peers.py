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
import secrets
import shutil
import socket
import struct
import tempfile
import time
from dataclasses import dataclass

from app.settings.models import POOL

SEATS = 64  # room for every worker, old and new, during a reload (SIGHUP)
# pid, load (choices holding or waiting for a sequence), capacity (sequences), model (its
# index in LLM_MODELS, or POOL), ready (1 once its model has loaded), pool (1 for an on-demand
# pool worker), used (when its model last served a request, CLOCK_MONOTONIC milliseconds),
# asleep (1 while its start-up model sleeps: weights and KV freed until a request wakes it)
_ENTRY = struct.Struct("qqqqqqqq")

_RESERVED = -1  # pid of a seat whose worker is being forked


@dataclass(frozen=True)
class Peer:
    """What one worker has published."""

    seat: int
    pid: int
    load: int
    capacity: int
    model: int
    ready: bool
    pool: bool = False
    used: int = 0
    asleep: bool = False

    @property
    def idle_seconds(self) -> float:
        """How long since its model last served a request."""
        return time.monotonic() - self.used / 1000

    @property
    def live(self) -> bool:
        return self.pid > 0  # not a reserved or free seat

    @property
    def room(self) -> int:
        return self.capacity - self.load


class PeerTable:
    """Per-worker pid, load, model and readiness in memory shared by the master and every worker."""

    def __init__(self) -> None:
        self._memory = mmap.mmap(-1, SEATS * _ENTRY.size)  # MAP_SHARED | MAP_ANONYMOUS
        self.rundir = tempfile.mkdtemp(prefix="llm-server-")
        self.secret = secrets.token_hex(16)  # marks requests relayed between this server's workers

    def claim(self, model: int = 0) -> int:
        """Master, before fork: reserve the first free seat for the worker about to start, holding
        `model` (POOL: a pool worker, which loads on-demand models)."""
        for seat in range(SEATS):
            if self._read(seat)[0] == 0:
                self._write(seat, _RESERVED, 0, 0, model, False, model == POOL)
                return seat
        raise RuntimeError(f"more than {SEATS} gunicorn workers at once")

    def release(self, seat: int) -> None:
        """Master, when a worker has exited: free its seat and remove its socket."""
        self._write(seat, 0, 0, 0, 0, False, False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path(seat))

    def publish(  # noqa: PLR0913 - one argument per field of the entry
        self,
        seat: int,
        load: int,
        capacity: int,
        model: int,
        ready: bool,
        pool: bool = False,
        used: int = 0,
        asleep: bool = False,
    ) -> None:
        """Worker: its load now, how many sequences it has, its model, whether it is loaded, whether it
        is a pool worker, when its model last served, and whether its model sleeps."""
        self._write(seat, os.getpid(), load, capacity, model, ready, pool, used, asleep)

    def peers(self) -> list[Peer]:
        """Every seat in use (live workers, and workers being forked)."""
        return [peer for seat in range(SEATS) if (peer := Peer(seat, *self._read(seat))).pid != 0]

    def holding(self) -> list[int]:
        """The model of every worker outside the pool, live or about to start."""
        return [peer.model for peer in self.peers() if not peer.pool]

    def pool_workers(self) -> int:
        """How many pool workers live or are about to start."""
        return sum(1 for peer in self.peers() if peer.pool)

    def socket_path(self, seat: int) -> str:
        """Where the worker in `seat` listens for relayed requests."""
        return os.path.join(self.rundir, f"worker-{seat}.sock")

    def close(self) -> None:
        """Master, on exit: remove the sockets' directory."""
        shutil.rmtree(self.rundir, ignore_errors=True)

    def _read(self, seat: int) -> tuple[int, int, int, int, bool, bool, int, bool]:
        pid, load, capacity, model, ready, pool, used, asleep = _ENTRY.unpack_from(
            self._memory, seat * _ENTRY.size
        )
        return pid, load, capacity, model, bool(ready), bool(pool), used, bool(asleep)

    def _write(self, seat: int, *entry: int) -> None:
        """pid, load, capacity, model, ready, pool[, used[, asleep]]."""
        _ENTRY.pack_into(self._memory, seat * _ENTRY.size, *(list(entry) + [0] * (8 - len(entry))))


@dataclass
class Worker:
    """This process's place in the table."""

    table: PeerTable
    seat: int
    model: int = 0  # its index in LLM_MODELS, or POOL
    capacity: int = 0  # sequences; 0 until the app has read its settings
    ready: bool = False
    pool: bool = False  # an on-demand pool worker: its model changes
    used: int = 0  # when its model last served a request (CLOCK_MONOTONIC milliseconds)
    asleep: bool = False  # its start-up model sleeps (app/serving/sleep.py)

    def publish(self, load: int) -> None:
        """Tell the peers how loaded this worker is."""
        self.table.publish(
            self.seat, load, self.capacity, self.model, self.ready, self.pool, self.used, self.asleep
        )

    def touch(self) -> None:
        """Its model serves a request now (what least-recently-used eviction and ttl go by)."""
        self.used = int(time.monotonic() * 1000)

    def became_ready(self) -> None:
        """The model has loaded: peers may send this worker its model's requests."""
        self.ready = True
        self.publish(0)

    def listen(self) -> socket.socket:
        """The private Unix socket peers relay requests to (a gevent socket once patched)."""
        path = self.table.socket_path(self.seat)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)
        return listener
