"""Which prompt prefixes each worker's KV cache holds, as block hashes in memory shared by all workers.

A conversation's next turn is cheap only where its history is cached. Each worker
writes, per sequence, the chained hashes of the 64-token blocks its cells hold
(app/engine/cache/prefix_blocks.py); any worker reads every other's, to send a request
where its longest prefix is (relay.py). One writer per row, on its hub; a reader may
see a row half-written, which costs at most one request a worse choice of worker.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

import numpy as np

from app.engine.cache.prefix_blocks import BLOCK

ENTRIES = 8192  # hashes per worker (64 KiB): 8 sequences of 64k tokens, or 256 of 2k


class PrefixBoard:
    """Per worker seat, rows of block hashes (0: empty), one row per sequence of that worker."""

    def __init__(self, seats: int) -> None:
        self._memory = mmap.mmap(-1, seats * ENTRIES * 8)  # MAP_SHARED | MAP_ANONYMOUS: shared through fork
        self._hashes = np.frombuffer(self._memory, dtype=np.uint64).reshape(seats, ENTRIES)

    def publish(self, seat: int, row: int, rows: int, hashes: list[int]) -> None:
        """Row `row` of `rows` (the worker's sequences) now holds these blocks; the first ones if too many."""
        width = ENTRIES // rows
        line = self._hashes[seat, row * width : (row + 1) * width]
        first = hashes[:width]
        line[len(first) :] = 0
        line[: len(first)] = np.asarray(first, dtype=np.uint64)

    def clear(self, seat: int) -> None:
        """Master, when a worker has exited: its cache went with it."""
        self._hashes[seat, :] = 0

    def cached_tokens(self, seat: int, prompt_blocks: list[int]) -> int:
        """How many leading tokens of a prompt (given as its block hashes) the worker in `seat` holds.

        A block's hash is chained through every block before it, so the furthest block present
        says the whole prefix up to it is held; the blocks before it may be left out of a row (a
        memory that cannot resume them: app/engine/cache/prefix_blocks.py `resumable_only`).
        """
        if not prompt_blocks:
            return 0
        present = np.flatnonzero(np.isin(np.asarray(prompt_blocks, dtype=np.uint64), self._hashes[seat]))
        return (int(present[-1]) + 1) * BLOCK if len(present) else 0


def publisher(board: PrefixBoard, seat: int) -> Callable[[int, int, list[int]], None]:
    """What the worker in `seat` calls as its sequences' cells change."""
    return lambda row, rows, hashes: board.publish(seat, row, rows, hashes)
