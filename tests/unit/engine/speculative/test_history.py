"""N-gram speculative decoding on the counting fake: drafts verified in the step, refused cells dropped."""

from __future__ import annotations

from app.engine.speculative.history import NgramDrafter
from app.engine.types import DraftLimits
from tests.unit.engine.fake_context import FakeContext, job
from tests.unit.engine.test_batcher import Run

LIMITS = DraftLimits(n_max=8)


def test_the_drafter_proposes_what_followed_the_latest_match() -> None:
    drafter = NgramDrafter([1, 2, 3, 9, 9, 1, 2, 3, 4, 5, 6, 1, 2, 3], 64, LIMITS)
    drafter.length = 8
    # [.., 1, 2, 3] last appeared before 4, 5, 6 (the later of its two earlier places); from
    # there to the end repeats as a loop.
    assert drafter.propose(room=8, accept_rate_needed=0.0).tolist() == [4, 5, 6, 1, 2, 3, 4, 5]
    assert drafter.propose(room=2, accept_rate_needed=0.0).tolist() == [4, 5]
    assert NgramDrafter([1, 2, 3, 4], 64, LIMITS).propose(8, 0.0).tolist() == []  # nothing repeats


def test_a_long_match_drafts_far_and_a_short_one_little() -> None:
    copied = list(range(10, 50))  # 40 tokens, then the first 30 of them again: text being copied
    long_match = NgramDrafter([*copied, 99, *copied[:30]], 200, DraftLimits(n_max=16))
    # 30 tokens match: each next one is taken as kept with a chance of 30/32.
    assert long_match.propose(16, accept_rate_needed=0.5).tolist() == list(range(40, 50))
    assert len(long_match.propose(16, accept_rate_needed=0.8)) == 3  # a busier step: shorter
    short_match = NgramDrafter([5, 6, 7, 1, 2, 9, 9, 3, 1, 2], 200, DraftLimits(n_max=16))
    assert short_match.propose(16, accept_rate_needed=0.5).tolist() == []  # two tokens: not worth it


def test_after_a_refusal_a_choice_pauses_but_not_where_text_is_copied() -> None:
    looping = NgramDrafter([7, 8, 9, 6] * 3, 200, DraftLimits(n_max=16))  # 11 tokens match
    looping.verified(4, 0)  # refused outright: a pause of two steps...
    assert len(looping.propose(16, 0.5)) > 0  # ... which a long match ignores
    chance = NgramDrafter([1, 2, 3, 4, 9, 1, 2, 3, 4], 200, DraftLimits(n_max=16))  # 4 tokens match
    chance.verified(4, 0)
    assert [len(chance.propose(16, 0.5)) for _ in range(3)] == [0, 0, 1]  # a one-token try after it


def test_where_neither_match_nor_record_pays_only_a_one_token_try_and_only_alone() -> None:
    drafter = NgramDrafter([1, 2, 3, 4, 9, 1, 2, 3, 4], 20, LIMITS)  # a 4-gram repeats, no further
    assert len(drafter.propose(8, accept_rate_needed=0.5)) == 1
    assert len(drafter.propose(8, accept_rate_needed=0.8)) == 0  # shared with 4 others: no
    assert len(NgramDrafter([1, 2, 3, 9, 2, 3], 20, LIMITS).propose(8, accept_rate_needed=0.5)) == 0


def test_a_draft_is_verified_in_the_step_and_its_refused_cells_are_dropped() -> None:
    context = FakeContext(parallel=1, n_ctx=64, n_batch=32)
    run = Run(context)
    # The counting model continues 1, 2, 3 with 4, 5, 6, 7...; the prompt wrote 4, 5, 6, then 1.
    copying = job([1, 2, 3, 4, 5, 6, 1, 2, 3], max_tokens=8, drafts=DraftLimits(n_max=8))
    run.submit(copying)
    run.until_idle()
    assert run.text(copying) == "<4><5><6><7><8><9><10><11>"  # what plain decoding makes
    steps = [[r.token for r in rows] for rows in context.decodes[1:]]
    # 4 with a one-token draft (5: kept); 6 with a draft of two (1, 2: refused at once);
    # then no draft (a pause) and the rest one token a step.
    assert steps == [[4, 5], [6, 1, 2], [7], [8], [9], [10]]
    assert [(r.sampled, r.drafted, r.accepted) for r in run.reports[1:4]] == [(2, 1, 1), (1, 2, 0), (1, 0, 0)]
    # The cache holds exactly the tokens decoded and kept: the prompt and the answer but its last.
    kept = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert [context.cells[0][p] for p in sorted(context.cells[0])] == kept
    assert run.batcher.sequences[0].cached == kept


def test_the_end_of_generation_inside_a_draft_ends_the_choice_there() -> None:
    context = FakeContext(parallel=1)
    run = Run(context)
    # 97 is followed by 98, 99, then the end: the draft (99, 50) is kept as far as 99.
    ending = job([96, 97, 98, 99, 50, 96, 97], max_tokens=8, drafts=DraftLimits(n_max=8))
    run.submit(ending)
    run.until_idle()
    assert run.text(ending) == "<98><99>" and run.ending(ending).finish_reason == "stop"
    assert run.batcher.sequences[0].cached[-2:] == [98, 99]  # the end token itself is not kept
    assert len(context.cells[0]) == len(run.batcher.sequences[0].cached)


def test_a_stop_string_inside_a_kept_draft_ends_the_choice_and_never_leaks() -> None:
    run = Run(FakeContext(parallel=1))
    copying = job([1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3], max_tokens=8, stop=["<6>"], drafts=DraftLimits(8))
    run.submit(copying)
    run.until_idle()
    assert run.text(copying) == "<4><5>" and run.ending(copying).stop_sequence == "<6>"


def test_a_draft_never_reaches_past_max_tokens() -> None:
    context = FakeContext(parallel=1)
    run = Run(context)
    copying = job([1, 2, 3, 4, 5, 6, 1, 2, 3], max_tokens=2, drafts=DraftLimits(n_max=8))
    run.submit(copying)
    run.until_idle()
    assert run.text(copying) == "<4><5>" and run.ending(copying).finish_reason == "length"
    assert [[r.token for r in rows] for rows in context.decodes[1:]] == [[4]]  # 5 is the last: no draft


def test_drafts_that_find_the_kv_cache_full_are_dropped_for_a_step_and_nothing_ends() -> None:
    context = FakeContext(parallel=1)
    run = Run(context)
    copying = job([1, 2, 3, 4, 5, 6, 1, 2, 3], max_tokens=6, drafts=DraftLimits(n_max=8))
    run.submit(copying)
    run.step()  # the prompt; 4 sampled
    context.full = 1
    run.step()  # 4 and its draft do not fit: taken back
    assert run.reports[-1].decoded == 0 and run.batcher.sequences[0].cached == [1, 2, 3, 4, 5, 6, 1, 2, 3]
    run.until_idle()
    assert run.text(copying) == "<4><5><6><7><8><9>" and run.ending(copying).finish_reason == "length"
    assert [r.token for r in context.decodes[1]] == [4]  # the retried step went without its draft
