"""Which worker serves a request, decided from a snapshot of the peer table: pure functions, no sockets.

Every choice between workers is here, each over plain data, so each is a table-driven
unit test (tests/unit/serving/test_routing.py); relay.py does the socket work of a
choice, and api/routing/ asks these questions for a view.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.serving.model_holder import SETTLE
from app.serving.peers import Peer, Worker
from app.serving.waiting_line import Waiter
from app.settings.models import POOL


@dataclass(frozen=True)
class Snapshot:
    """The peer table as one worker sees it when a request arrives."""

    seat: int  # this worker's seat
    model: int  # the model this worker holds (its LLM_MODELS index, or POOL)
    peers: tuple[Peer, ...]

    def others_ready(self, model: int) -> list[Peer]:
        """The other live, ready workers holding `model`."""
        return [p for p in self.peers if p.seat != self.seat and p.live and p.ready and p.model == model]

    def holding(self, model: int) -> list[Peer]:
        """Every live worker holding `model` (this one included), ready or loading."""
        return [p for p in self.peers if p.live and p.model == model]


def snapshot_of(worker: Worker) -> Snapshot:
    """What `worker` sees of the table now (one read of the shared memory)."""
    return Snapshot(worker.seat, worker.model, tuple(worker.table.peers()))


def roomiest(snapshot: Snapshot, model: int) -> Peer | None:
    """The other ready worker holding `model` with the most free sequences (lowest seat on a tie),
    an awake one before one whose model sleeps (waking it costs a load)."""
    ready = snapshot.others_ready(model)
    return max(ready, key=lambda p: (not p.asleep, p.room, -p.seat)) if ready else None


def awake_peer(snapshot: Snapshot, model: int) -> int | None:
    """Where a request goes that landed on a worker whose model sleeps: another worker of `model`,
    awake, with a free sequence; None to wake the model here."""
    awake = [p for p in snapshot.others_ready(model) if not p.asleep and p.room > 0]
    return max(awake, key=lambda p: (p.room, -p.seat)).seat if awake else None


def model_holder(snapshot: Snapshot, model: int) -> int | None:
    """Where a request for a model this worker does not hold goes: the roomiest ready holder."""
    peer = roomiest(snapshot, model)
    return None if peer is None else peer.seat


def freer_peer(snapshot: Snapshot, has_room: bool) -> int | None:
    """Where a request goes when this worker has no free sequence: a peer with one (else: queue here).
    Also asked again while a request waits in the queue (a migration)."""
    if has_room:
        return None
    peer = roomiest(snapshot, snapshot.model)
    return peer.seat if peer is not None and peer.room > 0 else None


def warmer_peer(snapshot: Snapshot, cached_in: Callable[[int], int]) -> tuple[int, int, int] | None:
    """(seat, its cached tokens, this worker's) of the peer whose cache holds a longer prefix of the
    prompt than this worker's (`cached_in(seat)`), among those with a free sequence; None: stay.

    A prefix block is 64 tokens evaluated (on a CPU, about a tenth of a second), a relay a
    local socket's round trip (about a millisecond), so any longer cached prefix is worth
    the hop; waiting for a sequence costs a whole answer, so only peers with room count.
    """
    here = cached_in(snapshot.seat)
    best: tuple[int, int, int] | None = None  # cached tokens, free sequences, seat
    for peer in snapshot.others_ready(snapshot.model):
        cached = cached_in(peer.seat)
        if peer.room > 0 and cached > here and (best is None or (cached, peer.room) > best[:2]):
            best = (cached, peer.room, peer.seat)
    return None if best is None else (best[2], best[0], here)


def keyed_peer(snapshot: Snapshot, key: str, cached_in: Callable[[int], int]) -> int | None:
    """Where a request with OpenAI's `prompt_cache_key` goes when no peer caches more of its prompt:
    the key's home among the ready workers of this model, if it has a free sequence and caches
    as much of the prompt as this one; None: stay.

    The home is chosen by rendezvous hashing (the worker whose hash with the key is highest),
    so every worker agrees on it without sharing anything, and a worker that comes or goes
    moves only the keys it was home to.
    """
    ready = [peer for peer in snapshot.holding(snapshot.model) if peer.ready]
    if not ready:
        return None
    home = max(ready, key=lambda peer: _weight(key, peer.seat))
    if home.seat == snapshot.seat or home.room <= 0 or cached_in(home.seat) < cached_in(snapshot.seat):
        return None
    return home.seat


def _weight(key: str, seat: int) -> int:
    digest = hashlib.blake2b(f"{seat}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rank(snapshot: Snapshot) -> int:
    """This worker's place among the live workers of its model, by seat (llama-server's slot ids
    go on from one worker's sequences to the next's)."""
    seats = sorted(peer.seat for peer in snapshot.holding(snapshot.model))
    return seats.index(snapshot.seat) if snapshot.seat in seats else 0


def ranked_peer(snapshot: Snapshot, place: int) -> int | None:
    """The seat of the worker at `place` among the live workers of this one's model, if there is one."""
    seats = sorted(peer.seat for peer in snapshot.holding(snapshot.model))
    return seats[place] if 0 <= place < len(seats) else None


def loader_for(
    snapshot: Snapshot, model: int, pool_seat: int | None, line: Sequence[Waiter] = ()
) -> int | None:
    """The pool worker that should load on-demand `model`; None to wait (it is loading, or no worker
    is free for it yet).

    Models load in the order of their oldest waiting request (`line`; a load nobody waits for, an
    operator's, comes after them): the first takes the first free worker, the next the next.
    Free: one holding no model first (this worker, `pool_seat`, if it is one: no hop), then
    those whose model has been idle longest (least recently used, never one serving requests,
    nor one whose model requests wait for).
    """
    pool = [peer for peer in snapshot.peers if peer.live and peer.pool]
    if any(peer.model == model for peer in pool):
        return None  # loading there now (or just loaded): wait for it
    order = load_order(pool, line)
    place = order.index(model) if model in order else len(order)
    empty = sorted(
        (peer.seat for peer in pool if peer.model == POOL), key=lambda seat: (seat != pool_seat, seat)
    )
    waited = {waiter.model for waiter in line}
    idle = [
        peer
        for peer in pool
        if peer.model != POOL and peer.load == 0 and peer.idle_seconds >= SETTLE and peer.model not in waited
    ]
    free = empty + [peer.seat for peer in sorted(idle, key=lambda peer: peer.used)]
    return free[place] if place < len(free) else None


def load_order(pool: Sequence[Peer], line: Sequence[Waiter]) -> list[int]:
    """The models requests wait for that no pool worker holds, oldest waiting request first."""
    held = {peer.model for peer in pool}
    oldest: dict[int, int] = {}
    for waiter in line:
        if waiter.model not in held:
            oldest[waiter.model] = min(oldest.get(waiter.model, waiter.arrival), waiter.arrival)
    return sorted(oldest, key=oldest.__getitem__)


def first_in_line(line: Sequence[Waiter], model: int, arrival: int) -> bool:
    """Whether a request for `model` that arrived at `arrival` may go to a worker holding it: no
    request for it that arrived earlier still waits (it goes first, and the holder serves in
    the order requests reach it)."""
    return not any(waiter.model == model and waiter.arrival < arrival for waiter in line)


def ready_holder(snapshot: Snapshot, model: int) -> int | None:
    """The seat of a worker holding `model` ready (this one included), if any."""
    return next((peer.seat for peer in snapshot.holding(model) if peer.ready), None)


def loading(snapshot: Snapshot, model: int) -> bool:
    """Whether some worker is loading `model` now."""
    return any(not peer.ready for peer in snapshot.holding(model))


def first_fitting(models: Sequence[bool], wants_embedding: bool | None) -> int:
    """The model a request that names none is for: the first whose kind (`models[i]`: an embedding
    model) fits what the route needs (None: any), else the first."""
    fits = [
        i for i, embedding in enumerate(models) if wants_embedding is None or embedding == wants_embedding
    ]
    return fits[0] if fits else 0
