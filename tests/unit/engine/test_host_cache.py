"""The host-memory prompt cache on the counting fake: cells kept when taken, given back on a prefix hit."""

from __future__ import annotations

import pytest

from app.engine.batcher import Batcher
from app.engine.batcher_settings import BatcherSettings
from app.engine.cache.host_cache import HostCache
from app.engine.cache.prefix_blocks import block_hashes
from app.engine.cache.saved_state import SavedState, holds_media, longest
from app.engine.sequence import Sequence
from tests.unit.engine.fake_context import FakeContext, job
from tests.unit.engine.test_batcher import Run

HISTORY = list(range(1, 81))  # 80 tokens: a whole block of 64 and some


def run_with_host_cache(context: FakeContext, limit: int = 1 << 20) -> Run:
    run = Run(context)
    run.batcher = Batcher(context, BatcherSettings(16, True, 0, cache_ram_bytes=limit), run._deliver)
    return run


def test_a_conversation_pushed_out_of_its_sequence_comes_back_from_host_memory() -> None:
    context = FakeContext(parallel=1, n_ctx=256, n_batch=64)
    run = run_with_host_cache(context)
    first = job(HISTORY, max_tokens=3)  # the counting model answers 81, 82, 83
    run.submit(first)
    run.until_idle()
    other = job([90, 91, 92], max_tokens=2)  # takes the only sequence: the history is kept in memory
    run.submit(other)
    run.until_idle()
    assert run.batcher.host_cache is not None and run.batcher.host_cache.used > 0
    again = job(HISTORY + [81, 82, 5, 6], max_tokens=2)  # the next turn
    decodes_before = len(context.decodes)
    run.submit(again)
    run.until_idle()
    assert run.ending(again).cached_tokens == 82  # the history and the answer, restored
    evaluated = [r.token for r in context.decodes[decodes_before]]
    assert evaluated == [5, 6]  # only the new turn is evaluated
    assert run.text(again) == "<7><8>"
    assert [context.cells[0][p] for p in range(85)] == [*HISTORY, 81, 82, 5, 6, 7]


def test_kept_states_stay_within_the_limit_and_the_oldest_goes_first() -> None:
    context = FakeContext(parallel=1, n_ctx=256, n_batch=64)
    sequence = Sequence(0)
    other = [t + 100 for t in HISTORY]
    context.cells[0] = dict(enumerate(other))
    room = len(context.save_state(0))  # the larger of the two states
    context.cells[0], sequence.cached = dict(enumerate(HISTORY)), list(HISTORY)
    cache = HostCache(limit_bytes=room + 10)
    cache.save(context, sequence)
    assert cache.used == len(context.save_state(0))
    context.cells[0], sequence.cached = dict(enumerate(other)), list(other)
    cache.save(context, sequence)  # no room for both: the first goes
    assert cache.find([*HISTORY, 1], beat=0) is None
    found = cache.find([*other, 1], beat=0)
    assert found is not None and found[1] == 80
    assert cache.restore(context, sequence, *found) == 80 and sequence.cached == other
    short = HostCache(limit_bytes=1 << 20)
    sequence.cached = HISTORY[:10]
    short.save(context, sequence)  # under a block: not worth keeping
    assert short.used == 0


def test_states_are_kept_under_their_lora_scales_and_found_only_under_the_same() -> None:
    context = FakeContext(parallel=1, n_ctx=256, n_batch=64)
    sequence = Sequence(0)
    cache = HostCache(limit_bytes=1 << 20)
    for scales in ((), (0.5,), (1.0,)):  # the same tokens evaluated under three sets of scales
        context.cells[0], sequence.cached, sequence.adapters = dict(enumerate(HISTORY)), list(HISTORY), scales
        cache.save(context, sequence)
    assert cache.used == 3 * len(context.save_state(0))  # three states: none stands for another
    for scales in ((), (0.5,), (1.0,)):
        found = cache.find([*HISTORY, 1], beat=0, adapters=scales)
        assert found is not None and found[0].adapters == scales and found[1] == 80
        sequence.adapters = (9.0,)
        assert cache.restore(context, sequence, *found) == 80 and sequence.adapters == scales
    assert cache.find([*HISTORY, 1], beat=0, adapters=(0.25,)) is None
    assert len(cache.published()[0]) > 0 and all(
        not row for row in cache.published()[1:]
    )  # base model's only


def test_a_pinned_state_stays_over_others_until_its_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("app.engine.cache.host_cache.time.monotonic", lambda: now[0])
    context = FakeContext(parallel=1, n_ctx=256, n_batch=64)
    sequence = Sequence(0)
    other = [t + 100 for t in HISTORY]
    context.cells[0] = dict(enumerate(other))
    cache = HostCache(limit_bytes=len(context.save_state(0)) + 10)  # room for one
    context.cells[0], sequence.cached = dict(enumerate(HISTORY)), list(HISTORY)
    sequence.pinned = (64, now[0] + 300)  # a client's cache_control over its first 64 tokens
    cache.save(context, sequence)
    context.cells[0], sequence.cached, sequence.pinned = dict(enumerate(other)), list(other), (0, 0.0)
    cache.save(context, sequence)  # no room for both: the newcomer is not kept, the pinned one is
    assert cache.find([*HISTORY, 1], beat=0) is not None and cache.find([*other, 1], beat=0) is None
    now[0] += 301  # its time is up: it goes like any other
    cache.save(context, sequence)
    assert cache.find([*HISTORY, 1], beat=0) is None and cache.find([*other, 1], beat=0) is not None


def test_a_kept_state_past_an_image_is_worth_restoring_for_less_than_a_block() -> None:
    # 30 text tokens, an image's 20 positions (its negative placeholder), 5 tokens after it.
    with_image = [*range(1, 31), *[-7] * 20, *range(31, 36)]
    held = SavedState(tuple(with_image), b"", tuple(block_hashes(with_image)))
    assert longest([held], [*with_image, 40, 41], beat=30, scope="") == (
        held,
        55,
    )  # the image need not be encoded again
    text = [*range(1, 56)]
    plain = SavedState(tuple(text), b"", tuple(block_hashes(text)))
    # 25 text tokens more: not worth a restore
    assert longest([plain], [*text, 40], beat=30, scope="") is None
    assert holds_media([5, -7, 6]) and not holds_media(text)
