"""N-gram speculative decoding on the counting fake: drafts verified in the step, refused cells dropped."""

from __future__ import annotations

from app.engine.speculation import NgramDrafter
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


def test_a_draft_grows_while_accepted_whole_and_pauses_after_refusals() -> None:
    drafter = NgramDrafter([7, 8] * 20, 200, DraftLimits(n_max=16))
    assert len(drafter.propose(16, 0.0)) == 2  # starts short
    drafter.verified(2, 2)
    assert len(drafter.propose(16, 0.0)) == 4
    drafter.verified(4, 4)
    drafter.verified(8, 8)
    assert len(drafter.propose(16, 0.0)) == 16
    drafter.verified(16, 3)  # refused after three: drafts as far as was kept
    assert len(drafter.propose(16, 0.0)) == 3
    drafter.verified(3, 0)  # refused outright: waits two steps, then tries short again
    assert [len(drafter.propose(16, 0.0)) for _ in range(3)] == [0, 0, 2]


def test_a_busy_step_asks_more_of_a_choices_record() -> None:
    drafter = NgramDrafter([7, 8] * 20, 200, DraftLimits(n_max=16))
    drafter.length = 16
    drafter.verified(10, 5)  # kept about half
    assert len(drafter.propose(16, accept_rate_needed=0.1)) > 1
    # Where the record does not pay, a single token where a whole 4-gram repeats, as here...
    assert len(drafter.propose(16, accept_rate_needed=0.8)) == 1
    # ... but not where only the last two tokens do.
    assert len(NgramDrafter([1, 2, 3, 9, 2, 3], 20, LIMITS).propose(8, accept_rate_needed=0.8)) == 0
    assert len(NgramDrafter([1, 2, 3, 9, 2, 3], 20, LIMITS).propose(8, accept_rate_needed=0.5)) == 1


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
