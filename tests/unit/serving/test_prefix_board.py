"""The routing board: what a worker says its cache holds, and how much of a prompt that is."""

from __future__ import annotations

from app.engine.cache.prefix_blocks import BLOCK, block_hashes, resumable_only
from app.engine.memory import Resumable
from app.serving.prefix_board import PrefixBoard

HISTORY = list(range(1, 5 * BLOCK + 1))  # five whole blocks


def test_a_prompt_counts_up_to_the_furthest_block_a_worker_holds() -> None:
    board = PrefixBoard(seats=2)
    hashes = block_hashes(HISTORY)
    board.publish(0, row=0, rows=4, hashes=hashes)
    assert board.cached_tokens(0, block_hashes(HISTORY + [7] * BLOCK)) == 5 * BLOCK
    assert board.cached_tokens(0, block_hashes(HISTORY[: 2 * BLOCK] + [0] * BLOCK)) == 2 * BLOCK
    assert board.cached_tokens(1, hashes) == 0  # another worker holds nothing


def test_blocks_a_memory_cannot_resume_into_are_not_counted() -> None:
    board = PrefixBoard(seats=1)
    # A recurrent state with its checkpoint inside block 2: blocks 0, 1 and 3 are left out.
    held = resumable_only(block_hashes(HISTORY), Resumable(len(HISTORY), len(HISTORY), (2 * BLOCK + 10,)))
    board.publish(0, row=0, rows=1, hashes=held)
    assert board.cached_tokens(0, block_hashes(HISTORY)) == 5 * BLOCK  # the whole history: resumed live
    # Diverging in block 3: only the checkpoint's block counts (it resumes at 2 blocks and 10 tokens).
    assert board.cached_tokens(0, block_hashes(HISTORY[: 3 * BLOCK + 5] + [0] * BLOCK)) == 3 * BLOCK
    assert board.cached_tokens(0, block_hashes(HISTORY[:BLOCK] + [0] * BLOCK)) == 0
