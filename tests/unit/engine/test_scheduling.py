"""The batcher's decisions without a model: which sequence a prompt takes, what it reuses, the budget."""

from __future__ import annotations

import pytest

from app.engine.scheduling import (
    CacheView,
    Placement,
    chunk_size,
    common_prefix,
    place,
    prompt_budget,
    session_heads,
    share_prompt,
)

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


def view(seq_id: int, cached: list[int], last_used: int = 0, free: bool = True) -> CacheView:
    return CacheView(seq_id, cached, last_used, free)


def in_session(seq_id: int, cached: list[int], session: str, last_used: int = 0) -> CacheView:
    return CacheView(seq_id, cached, last_used, True, session=session)


def test_a_sessions_longest_prompt_is_its_head() -> None:
    views = [in_session(0, [1] * 40, "a"), in_session(1, [2] * 5, "a"), in_session(2, [3] * 9, "b"),
             view(3, [4] * 99)]  # fmt: skip
    assert session_heads(views) == {0, 2}  # no session said: no head, however long


@pytest.mark.parametrize("pooled", [True, False])
def test_a_side_request_never_takes_its_sessions_main_conversation(pooled: bool) -> None:
    # The main turn's cells (seq 0, least recently used) and a title request's (seq 1): a
    # quota probe of the same session takes the title's sequence, not the conversation's.
    views = [in_session(0, [9] * 50, "s", last_used=1), in_session(1, [8] * 6, "s", last_used=2)]
    assert place(views, [7, 7, 7], reuse_cache=True, pooled=pooled) == Placement(1, 0)
    # Nor does one that begins as the conversation does (a template's first tokens): it keeps
    # too little of the head's cells to be worth them.
    assert place(views, [9, 9, 9, 7, 7], reuse_cache=True, pooled=pooled).seq_id == 1
    # Nor does another conversation's first request, while a sequence no session leads is free.
    other = [*views, view(2, [6] * 30, last_used=3)]
    assert place(other, [5, 5], reuse_cache=True, pooled=True) == Placement(1, 0)


def test_a_sessions_edited_turn_still_resumes_what_its_head_shares() -> None:
    # A compacted or edited conversation keeps the system prompt only (20 of 60 cells), but it is
    # the conversation's next turn, as long as the last: it takes its head by the usual rule.
    views = [in_session(0, [9] * 20 + [8] * 40, "s", last_used=1), in_session(1, [7] * 6, "s", last_used=2)]
    assert place(views, [9] * 20 + [5] * 35, reuse_cache=True, pooled=False) == Placement(0, 20)


def test_when_every_free_sequence_leads_a_session_the_usual_choice_stands() -> None:
    views = [in_session(0, [9] * 50, "s", last_used=4), in_session(1, [8] * 6, "t", last_used=2)]
    assert place(views, [7, 7, 7], reuse_cache=True, pooled=True) == Placement(1, 0)  # least recently used
    # And a session's next turn returns to its head as any conversation does.
    assert place(views, [9] * 50 + [1], reuse_cache=True, pooled=True) == Placement(0, 50)


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0


@pytest.mark.parametrize(("pooled", "chosen"), [(True, 1), (False, 0)])
def test_without_the_cache_a_fresh_start(pooled: bool, chosen: int) -> None:
    # One pool: the least recently used free sequence; cells per sequence: the lowest free id.
    views = [view(0, PROMPT[:9], last_used=5), view(1, [], last_used=2), view(2, [], 1, free=False)]
    assert place(views, PROMPT, reuse_cache=False, pooled=pooled) == Placement(chosen, 0)


@pytest.mark.parametrize("pooled", [True, False])
def test_a_conversations_next_turn_returns_to_its_own_sequence(pooled: bool) -> None:
    views = [view(0, [7, 7], last_used=1), view(1, PROMPT[:6] + [99], last_used=9), view(2, [], last_used=3)]
    assert place(views, PROMPT + [11, 12], reuse_cache=True, pooled=pooled) == Placement(1, 6)


def test_one_prompt_token_is_always_left_to_evaluate() -> None:
    assert place([view(0, PROMPT)], PROMPT, reuse_cache=True, pooled=False) == Placement(0, 9)
    assert place([view(0, PROMPT + [11])], PROMPT, reuse_cache=True, pooled=False) == Placement(0, 9)


def test_with_cells_per_sequence_an_empty_sequence_goes_before_a_cached_one() -> None:
    views = [view(0, [5, 6, 7], last_used=1), view(1, [8, 9], last_used=2), view(2, []), view(3, [])]
    assert place(views, PROMPT, reuse_cache=True, pooled=False) == Placement(2, 0)
    full = [view(0, [5, 6, 7], last_used=9), view(1, [8, 9], last_used=2)]
    assert place(full, PROMPT, reuse_cache=True, pooled=False) == Placement(0, 0)  # none empty: lowest id


def test_a_small_overlap_is_not_worth_keeping_a_sequence_for() -> None:
    # Sequence 2 shares one token of ten (below the 10% bar): with cells per sequence the
    # lowest free id is taken, which keeps the batch's sequence ids together.
    views = [view(0, [], free=False), view(1, [], last_used=8), view(2, [1, 42], last_used=1)]
    assert place(views, PROMPT, reuse_cache=True, pooled=False) == Placement(1, 0)
    # One pool: the oldest sequence, which keeps its one token (sharing a pool's cells costs nothing).
    assert place(views, PROMPT, reuse_cache=True, pooled=True) == Placement(2, 1)


def test_a_longer_prefix_is_borrowed_from_a_busy_sequence_of_the_pool() -> None:
    views = [
        view(0, PROMPT[:8], last_used=4, free=False),
        view(1, [], last_used=1),
        view(2, [50], last_used=0),
    ]
    assert place(views, PROMPT, reuse_cache=True, pooled=True) == Placement(2, 8, donor=0)
    # With cells per sequence, borrowing would copy a whole context's buffer: it starts afresh.
    assert place(views, PROMPT, reuse_cache=True, pooled=False) == Placement(1, 0)


def test_own_cache_wins_when_it_is_as_long_as_any_other() -> None:
    views = [view(0, PROMPT[:5], free=False), view(1, PROMPT[:5] + [0], last_used=3)]
    assert place(views, PROMPT, reuse_cache=True, pooled=True) == Placement(1, 5)


def test_no_free_sequence_is_a_bug_of_the_caller() -> None:
    with pytest.raises(ValueError, match="no free sequence"):
        place([view(0, [], free=False)], PROMPT, reuse_cache=True, pooled=True)


@pytest.mark.parametrize(
    ("chunk", "room", "budget"), [(256, 500, 256), (256, 100, 100), (256, 0, 0), (8, 9, 8)]
)
def test_prompt_budget_is_a_chunk_within_the_batch_while_streams_wait(
    chunk: int, room: int, budget: int
) -> None:
    assert prompt_budget(chunk, room, streams_wait=True) == budget


@pytest.mark.parametrize(("chunk", "room"), [(256, 512), (256, 100), (8, 9), (256, 0)])
def test_prompt_budget_is_the_whole_batch_when_no_stream_waits(chunk: int, room: int) -> None:
    assert prompt_budget(chunk, room, streams_wait=False) == room


def test_prompt_budget_is_handed_out_first_come_first_served() -> None:
    assert share_prompt([(3, 100), (1, 50), (2, 10)], 120) == [(3, 100), (1, 20)]
    assert share_prompt([(3, 5), (1, 5)], 120) == [(3, 5), (1, 5)]
    assert share_prompt([(3, 5)], 0) == []


@pytest.mark.parametrize(
    ("share", "stops", "take"),
    [(16, [], 16), (16, [6], 6), (16, [0, 20], 16), (4, [6], 4)],
)
def test_a_prompt_chunk_stops_where_a_checkpoint_is_taken(share: int, stops: list[int], take: int) -> None:
    assert chunk_size(share, stops) == take
