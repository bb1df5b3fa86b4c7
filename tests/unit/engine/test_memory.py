"""Where a sequence's cache can be resumed on each kind of memory: pure decisions, table by table."""

from __future__ import annotations

import pytest

from app.engine.cache.prefix_blocks import BLOCK, resumable_only
from app.engine.memory import MemoryKind, Resumable, checkpoint_stops, describe, drafts_off

PLAIN = MemoryKind()
SWA = MemoryKind(window=32, sliding=32)
RECURRENT = MemoryKind(recurrent=True)
HYBRID_SWA = MemoryKind(window=32, recurrent=True, hybrid=True, sliding=32)
SWA_FULL = MemoryKind(swa_full=True, sliding=32)


@pytest.mark.parametrize(
    ("memory", "held", "pos_min", "live_from"),
    [
        (PLAIN, 100, 0, 0),
        (SWA, 100, 0, 0),  # nothing forgotten yet: any cut
        (SWA, 100, 50, 81),  # the token at 81 attends to 50..80, all held
        (SWA, 100, 90, 121),  # a cut after refused drafts lost cells the next token needs: none exact
        (RECURRENT, 100, 99, 100),  # only all of it
        (HYBRID_SWA, 100, 0, 100),
        (SWA_FULL, 100, 0, 0),  # a full-size cache keeps every position: any cut
        (SWA_FULL, 100, 68, 99),  # but one restored from a saved state holds only the window
    ],
)
def test_live_cells_resume_from(memory: MemoryKind, held: int, pos_min: int, live_from: int) -> None:
    assert memory.live_from(held, pos_min) == live_from


def test_only_memory_without_windows_or_states_is_cut_anywhere_whatever_it_went_through() -> None:
    assert PLAIN.cuts_anywhere and MemoryKind(experts=4).cuts_anywhere
    # A full-size window's memory is plain (no checkpoints needed), but a saved state of it keeps
    # only the cells the next token attends to, as llama.cpp's state_write skips masked ones.
    assert SWA_FULL.plain and not SWA_FULL.cuts_anywhere
    assert SWA_FULL.saved_pos_min(100, 0) == 68 and SWA.saved_pos_min(100, 50) == 68
    assert not any(m.cuts_anywhere for m in (SWA, RECURRENT, HYBRID_SWA))


@pytest.mark.parametrize(
    ("resumable", "wanted", "point"),
    [
        (Resumable(100), 60, 60),
        (Resumable(100, 81, (40, 70)), 90, 90),  # within the live range
        (Resumable(100, 81, (40, 70)), 75, 70),  # before it: the newest checkpoint at or before
        (Resumable(100, 81, (40, 70)), 39, 0),  # before every checkpoint: evaluate all
        (Resumable(100, 100, (96,)), 100, 100),  # a recurrent state extended as it is
        (Resumable(100, 100, (96,)), 99, 96),  # cut one short: back to the checkpoint
        (Resumable(10), 20, 10),  # never more than is held
    ],
)
def test_the_best_resume_point(resumable: Resumable, wanted: int, point: int) -> None:
    assert resumable.best(wanted) == point
    assert resumable.from_checkpoint(point) == (
        point in resumable.checkpoints and point < resumable.live_from
    )


def test_checkpoints_are_taken_before_a_prompt_ends_as_llama_server_takes_them() -> None:
    assert checkpoint_stops(1000, 0, 512) == (484, 996)
    assert checkpoint_stops(1000, 600, 512) == (996,)  # evaluation starts after the first
    assert checkpoint_stops(200, 0, 512) == (196,)
    assert checkpoint_stops(4, 0, 512) == ()  # too short to be worth one


def test_routing_hears_only_of_blocks_a_prompt_can_resume_into() -> None:
    hashes = [11, 12, 13, 14, 15]
    assert resumable_only(hashes, Resumable(5 * BLOCK)) == hashes
    # A recurrent state with a checkpoint inside block 2: blocks 0 and 1 would resume at 0.
    recurrent = Resumable(5 * BLOCK, 5 * BLOCK, (2 * BLOCK + 10,))
    assert resumable_only(hashes, recurrent) == [0, 0, 13, 0, 15]
    # A window whose live cells resume from block 3 on.
    assert resumable_only(hashes, Resumable(5 * BLOCK, 3 * BLOCK + 5)) == [0, 0, 0, 14, 15]


def test_what_the_log_and_props_say() -> None:
    assert describe(PLAIN, 8) == "plain (any cached prefix resumes)"
    assert describe(SWA, 8) == "swa (sliding window 32; 8 checkpoints per sequence)"
    assert "recurrent state" in describe(HYBRID_SWA, 0) and "LLM_CTX_CHECKPOINTS=0" in describe(HYBRID_SWA, 0)
    assert drafts_off(SWA, "ngram") == "" and drafts_off(RECURRENT, "none") == ""
    assert "cannot drop refused draft tokens" in drafts_off(RECURRENT, "ngram")
