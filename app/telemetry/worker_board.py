"""Each worker's live figures (busy sequences, waiting choices, recent tokens), readable by every worker.

Prometheus sums gauges over workers; the status page wants them per worker, and
any worker may answer its request. So each worker also writes the figures it sets
on the metrics into its own row of memory shared through fork (the master makes the
board before fork, as it makes the peer table), rows indexed by the peer table's seat.
Tokens are kept per second over the last minute, so an idle worker's rate decays
without it having to write anything.
"""

from __future__ import annotations

import gc
import mmap
import struct
import time
from dataclasses import dataclass

import gevent
import greenlet

from app.engine.memory import MemoryKind

WINDOW = 60  # seconds of token counts kept per worker
_HEAD = struct.Struct("qqqd")  # running choices, waiting choices, live greenlets, when they were counted
# KV cells and their bytes; draft tokens verified and kept, since start; KV cells choices hold now
_KV = struct.Struct("qqqqq")
_BUCKET = struct.Struct("qq")  # a second (Unix time), tokens generated during it
_LOADED = struct.Struct("d")  # seconds its model took to load (0: none loaded)
# Its model's memory: window, the model's own window, flags (_FLAGS), experts, checkpoints per
# sequence; then, since start, prompts resumed from a checkpoint and prompts evaluated in full
# although they shared a cached prefix.
_MEMORY = struct.Struct("qqqqqqq")
_FLAGS = ("known", "recurrent", "hybrid", "swa_full", "drafts_off")
_BUCKETS = _HEAD.size + _KV.size  # where a row's buckets start
_LOAD_AT = _BUCKETS + WINDOW * _BUCKET.size
_MEMORY_AT = _LOAD_AT + _LOADED.size
# Its model's LoRA adapters that requests use now, one bit per adapter: running, then waiting.
_ADAPTERS = struct.Struct("QQ")
_ADAPTERS_AT = _MEMORY_AT + _MEMORY.size
_ROW = _ADAPTERS_AT + _ADAPTERS.size


@dataclass(frozen=True)
class WorkerFigures:
    """One worker's figures as of now."""

    running: int  # choices holding a sequence
    waiting: int  # choices queued for one
    greenlets: int  # live greenlets in the worker (one or two per open connection), as last counted
    greenlets_counted_at: float  # when (Unix time; 0: not yet), so a reader can wait for a fresh count
    tokens_last_minute: int
    kv_cells: int = 0  # 0: not loaded yet
    kv_bytes: int = 0
    drafted: int = 0  # speculative decoding: draft tokens verified
    accepted: int = 0  # and kept
    kv_in_use: int = 0  # KV cells held by choices now
    load_seconds: float = 0.0  # how long its model took to load (0: none loaded yet)
    memory: MemoryFigures | None = None  # its model's memory (None: not loaded yet)

    @property
    def tokens_per_second(self) -> float:
        return round(self.tokens_last_minute / WINDOW, 2)


@dataclass(frozen=True)
class MemoryFigures:
    """A worker's model memory, and how its prompts resumed."""

    kind: MemoryKind
    drafts_off: bool
    checkpoints: int  # per sequence (0 where the memory needs none)
    checkpoint_restores: int  # prompts resumed from a checkpoint
    full_reprocessing: int  # prompts evaluated in full though they shared a cached prefix


@dataclass(frozen=True)
class PoolFigures:
    """The figures of every worker together."""

    running: int  # choices holding a sequence
    waiting: int  # choices queued for one
    kv_cells: int  # KV cells of every loaded generation worker
    kv_in_use: int  # of which choices hold

    @property
    def kv_usage(self) -> float:
        """Cells in use over cells available, 0-1 (0 before any model has loaded)."""
        return self.kv_in_use / self.kv_cells if self.kv_cells else 0.0


class WorkerBoard:
    """Rows of figures in shared memory; one writer per row (its worker, on its hub), any reader."""

    def __init__(self, seats: int) -> None:
        self._memory = mmap.mmap(-1, seats * _ROW)  # MAP_SHARED | MAP_ANONYMOUS: survives fork shared

    def record_load(self, seat: int, running: int, waiting: int) -> None:
        """The worker's choices now: holding a sequence, and waiting for one."""
        _, _, greenlets, counted_at = _HEAD.unpack_from(self._memory, seat * _ROW)
        _HEAD.pack_into(self._memory, seat * _ROW, running, waiting, greenlets, counted_at)

    def record_greenlets(self, seat: int, greenlets: int, now: float | None = None) -> None:
        """How many greenlets the worker has alive (a leak shows as growth at rest), counted `now`."""
        running, waiting, _, _ = _HEAD.unpack_from(self._memory, seat * _ROW)
        counted_at = time.time() if now is None else now
        _HEAD.pack_into(self._memory, seat * _ROW, running, waiting, greenlets, counted_at)

    def record_kv(self, seat: int, cells: int, size: int) -> None:
        """The worker's KV cache, once its model is loaded: cells and bytes."""
        _, _, drafted, accepted, in_use = _KV.unpack_from(self._memory, seat * _ROW + _HEAD.size)
        _KV.pack_into(self._memory, seat * _ROW + _HEAD.size, cells, size, drafted, accepted, in_use)

    def record_kv_in_use(self, seat: int, in_use: int) -> None:
        """KV cells the worker's choices hold now."""
        cells, size, drafted, accepted, _ = _KV.unpack_from(self._memory, seat * _ROW + _HEAD.size)
        _KV.pack_into(self._memory, seat * _ROW + _HEAD.size, cells, size, drafted, accepted, in_use)

    def add_drafts(self, seat: int, drafted: int, accepted: int) -> None:
        """Count draft tokens verified and kept."""
        cells, size, old_drafted, old_accepted, in_use = _KV.unpack_from(
            self._memory, seat * _ROW + _HEAD.size
        )
        values = (cells, size, old_drafted + drafted, old_accepted + accepted, in_use)
        _KV.pack_into(self._memory, seat * _ROW + _HEAD.size, *values)

    def record_memory(self, seat: int, kind: MemoryKind, checkpoints: int, drafts_off: bool) -> None:
        """The worker's model memory, once loaded (its resume counts start from 0)."""
        flags = (True, kind.recurrent, kind.hybrid, kind.swa_full, drafts_off)
        bits = sum(1 << bit for bit, on in enumerate(flags) if on)
        values = (kind.window, kind.sliding, bits, kind.experts, checkpoints, 0, 0)
        _MEMORY.pack_into(self._memory, seat * _ROW + _MEMORY_AT, *values)

    def add_resumes(self, seat: int, restores: int, full: int) -> None:
        """Count prompts resumed from a checkpoint, and prompts evaluated in full despite a shared prefix."""
        *head, old_restores, old_full = _MEMORY.unpack_from(self._memory, seat * _ROW + _MEMORY_AT)
        _MEMORY.pack_into(
            self._memory, seat * _ROW + _MEMORY_AT, *head, old_restores + restores, old_full + full
        )

    def record_load_seconds(self, seat: int, seconds: float) -> None:
        """How long the worker's model took to load."""
        _LOADED.pack_into(self._memory, seat * _ROW + _LOAD_AT, seconds)

    def add_tokens(self, seat: int, tokens: int, now: float | None = None) -> None:
        """Count `tokens` generated in the current second."""
        second = int(time.time() if now is None else now)
        offset = seat * _ROW + _BUCKETS + (second % WINDOW) * _BUCKET.size
        stamped, count = _BUCKET.unpack_from(self._memory, offset)
        # A bucket last written a minute (or more) ago starts over.
        _BUCKET.pack_into(self._memory, offset, second, tokens + (count if stamped == second else 0))

    def read(self, seat: int, now: float | None = None) -> WorkerFigures:
        """The figures of the worker in `seat`, tokens counted over the minute up to `now`."""
        second = int(time.time() if now is None else now)
        running, waiting, greenlets, counted_at = _HEAD.unpack_from(self._memory, seat * _ROW)
        kv = _KV.unpack_from(self._memory, seat * _ROW + _HEAD.size)
        start = seat * _ROW + _BUCKETS
        buckets = (_BUCKET.unpack_from(self._memory, start + i * _BUCKET.size) for i in range(WINDOW))
        tokens = sum(count for stamped, count in buckets if second - WINDOW < stamped <= second)
        (loaded,) = _LOADED.unpack_from(self._memory, seat * _ROW + _LOAD_AT)
        cells, size, drafted, accepted, in_use = kv
        return WorkerFigures(
            running, waiting, greenlets, counted_at, tokens, cells, size, drafted, accepted, in_use, loaded,
            self._memory_figures(seat),
        )  # fmt: skip

    def _memory_figures(self, seat: int) -> MemoryFigures | None:
        window, sliding, bits, experts, checkpoints, restores, full = _MEMORY.unpack_from(
            self._memory, seat * _ROW + _MEMORY_AT
        )
        known, recurrent, hybrid, swa_full, drafts_off = (bool(bits >> bit & 1) for bit in range(len(_FLAGS)))
        if not known:
            return None
        kind = MemoryKind(window, recurrent, hybrid, swa_full, sliding, experts)
        return MemoryFigures(kind, drafts_off, checkpoints, restores, full)

    def record_adapters(self, seat: int, running: int, waiting: int) -> None:
        """Which of its model's LoRA adapters requests use now (bit n: adapter n), running and waiting."""
        _ADAPTERS.pack_into(self._memory, seat * _ROW + _ADAPTERS_AT, running, waiting)

    def adapters(self, seat: int) -> tuple[int, int]:
        """The worker's adapter bits in use: (running, waiting)."""
        running, waiting = _ADAPTERS.unpack_from(self._memory, seat * _ROW + _ADAPTERS_AT)
        return running, waiting

    def totals(self) -> PoolFigures:
        """Every worker's load and KV cache added up: the instance as one model server sees it."""
        running = waiting = cells = in_use = 0
        for seat in range(len(self._memory) // _ROW):  # a free seat's row is zeros
            seat_running, seat_waiting, _, _ = _HEAD.unpack_from(self._memory, seat * _ROW)
            seat_cells, _, _, _, seat_in_use = _KV.unpack_from(self._memory, seat * _ROW + _HEAD.size)
            running, waiting = running + seat_running, waiting + seat_waiting
            cells, in_use = cells + seat_cells, in_use + seat_in_use
        return PoolFigures(running, waiting, cells, in_use)

    def clear(self, seat: int) -> None:
        """Master, when a worker has exited: its replacement in `seat` starts from nothing."""
        self._memory[seat * _ROW : (seat + 1) * _ROW] = bytes(_ROW)


def count_greenlets() -> int:
    """Live greenlets in this process (a walk of the heap: call it seldom)."""
    return sum(1 for thing in gc.get_objects() if isinstance(thing, greenlet.greenlet) and not thing.dead)


def sample_greenlets(board: WorkerBoard, seat: int, every: float = 5.0) -> None:
    """Count this worker's greenlets onto the board every `every` seconds while it is at rest.

    The walk holds the hub (and the GIL) for tens of milliseconds: taken while streams run, it
    was a stall of every stream once per `every` seconds, one step in a hundred at 8 streams
    (their inter-token p99). A leak shows at rest, which is where readers (the soak) look.
    """

    def loop() -> None:
        while True:
            figures = board.read(seat)
            if figures.running == 0 and figures.waiting == 0:
                board.record_greenlets(seat, count_greenlets())
            gevent.sleep(every)

    gevent.spawn(loop)
