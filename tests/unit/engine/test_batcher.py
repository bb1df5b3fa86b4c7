"""The batcher's step on a counting fake context: what each decode holds, and what each client gets."""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

import pytest

from app.engine.batcher import Batcher
from app.engine.batcher_settings import BatcherSettings, StepReport
from app.engine.choice import Job
from app.engine.generation import Delivery, Generation
from app.engine.lora.adapter_places import AdapterChange
from app.engine.lora.adapter_turns import ADAPTER_TURN
from app.engine.types import Chunk
from tests.unit.engine.fake_context import END, FakeContext, job


class Run:
    """A batcher over a fake context, stepped by hand; chunks gathered per generation."""

    def __init__(self, context: FakeContext, prefill_chunk: int = 16, reuse_cache: bool = True) -> None:
        self.context = context
        self.reports: list[StepReport] = []
        self.chunks: dict[Generation, list[Chunk]] = defaultdict(list)
        self.batcher = Batcher(context, BatcherSettings(prefill_chunk, reuse_cache, 0), self._deliver)

    def _deliver(self, delivery: Delivery, report: StepReport) -> None:
        for generation, chunk in delivery:
            self.chunks[generation].append(chunk)
        self.reports.append(report)

    def submit(self, *jobs: Job) -> None:
        for each in jobs:
            self.batcher.submit(each)

    def step(self, times: int = 1) -> None:
        for _ in range(times):
            assert self.batcher.cycle(wait=False)

    def until_idle(self, most: int = 100) -> None:
        for _ in range(most):
            # While a choice is busy the loop may wait: for the media encoder's thread, and only then.
            assert self.batcher.cycle(wait=any(s.busy for s in self.batcher.sequences))
            if not any(s.busy for s in self.batcher.sequences):
                return
        raise AssertionError("the batcher never went idle")

    def text(self, each: Job, index: int = 0) -> str:
        return "".join(c.text for c in self.chunks[each.generation] if c.index == index)

    def ending(self, each: Job, index: int = 0) -> Chunk:
        (last,) = [c for c in self.chunks[each.generation] if c.index == index and c.finish_reason]
        return last


def test_two_choices_side_by_side_take_one_token_each_per_step() -> None:
    run = Run(FakeContext(parallel=2))
    first, second = job([5, 6, 7], max_tokens=3), job([20, 21], max_tokens=3)
    run.submit(first, second)
    run.until_idle()
    assert run.text(first) == "<8><9><10>" and run.text(second) == "<22><23><24>"
    assert run.ending(first).finish_reason == run.ending(second).finish_reason == "length"
    prompts, *generating = run.context.decodes
    assert [(r.seq_id, r.token) for r in prompts] == [(0, 5), (0, 6), (0, 7), (1, 20), (1, 21)]
    # Then one token of each sequence per decode, in sequence-id order, both sampled.
    assert [[(r.seq_id, r.token) for r in rows] for rows in generating] == [
        [(0, 8), (1, 22)],
        [(0, 9), (1, 23)],
    ]
    assert [report.sampled for report in run.reports] == [2, 2, 2]


def test_a_long_prompt_is_evaluated_in_chunks_while_a_stream_keeps_generating() -> None:
    run = Run(FakeContext(parallel=2), prefill_chunk=4)
    streaming = job([1, 2], max_tokens=20)
    run.submit(streaming)
    run.step(2)
    long_prompt = job(list(range(30, 40)), max_tokens=2)
    run.submit(long_prompt)
    run.until_idle()
    for rows in run.context.decodes[2:5]:  # the long prompt's 10 tokens: 4, 4, then 2 and its first token
        assert [r.seq_id for r in rows].count(0) == 1  # the stream moves on every step
        assert [r.seq_id for r in rows].count(1) <= 4
    assert run.text(long_prompt) == "<40><41>"
    assert run.text(streaming) == "".join(f"<{t}>" for t in range(3, 23))


def test_a_prompt_alone_is_evaluated_a_whole_batch_a_step() -> None:
    run = Run(FakeContext(parallel=2, n_batch=32), prefill_chunk=4)
    alone = job(list(range(100, 170)), max_tokens=2)  # 70 tokens: 32, 32, then 6 and the first token
    run.submit(alone)
    run.until_idle()
    assert [len(rows) for rows in run.context.decodes] == [32, 32, 6, 1]
    assert run.text(alone) == "<170><171>"


def test_progress_is_reported_from_the_cache_after_each_prompt_step_before_the_first_token() -> None:
    run = Run(FakeContext(parallel=1, n_batch=4), prefill_chunk=4)
    first = job(list(range(10, 20)), max_tokens=1)
    run.submit(first)
    run.until_idle()
    assert not [c for c in run.chunks[first.generation] if c.progress]  # not asked: none
    again = job([*range(10, 20), *range(30, 36)], max_tokens=2, progress=True)
    run.submit(again)
    run.until_idle()
    chunks = run.chunks[again.generation]
    shown = [(c.progress.total, c.progress.cache, c.progress.processed) for c in chunks if c.progress]
    # 10 cached (the first prompt), then 6 more in steps of a batch (4) and 2; all before the first token.
    assert shown == [(16, 10, 10), (16, 10, 14), (16, 10, 16)]
    assert [c.progress is not None for c in chunks][:3] == [True, True, True]
    assert run.text(again) == "<36><37>" and all(c.text == "" for c in chunks if c.progress)


def test_the_end_of_generation_token_stops_a_choice_and_is_not_text() -> None:
    run = Run(FakeContext())
    ending = job([97], max_tokens=10)
    run.submit(ending)
    run.until_idle()
    assert run.text(ending) == "<98><99>"
    assert run.ending(ending).finish_reason == "stop" and run.ending(ending).completion_tokens == 2


def test_a_cancelled_generation_leaves_at_the_next_step_and_frees_its_sequence() -> None:
    run = Run(FakeContext(parallel=1))
    leaving = job([1], max_tokens=50)
    run.submit(leaving)
    run.step(3)
    leaving.generation.cancel()
    run.step()
    assert run.ending(leaving).finish_reason == "cancelled"
    assert not run.batcher.sequences[0].busy and run.context.samplers[0].closed
    after = job([60], max_tokens=1)
    run.submit(after)
    run.until_idle()
    assert run.text(after) == "<61>"


def test_a_prompt_that_extends_a_cached_one_evaluates_only_what_is_new() -> None:
    run = Run(FakeContext(parallel=2))
    first = job([10, 11, 12, 13], max_tokens=2)
    run.submit(first)
    run.until_idle()
    decoded = len(run.context.decodes)
    # The next turn: the whole first exchange (the last sampled token was never decoded) plus more.
    second = job([10, 11, 12, 13, 14, 50, 51], max_tokens=1)
    run.submit(second)
    run.until_idle()
    (rows,) = run.context.decodes[decoded:]
    assert [(r.seq_id, r.position, r.token) for r in rows] == [(0, 5, 50), (0, 6, 51)]
    assert run.ending(second).cached_tokens == 5
    assert run.text(second) == "<52>"


def test_without_the_prompt_cache_every_prompt_is_evaluated_in_full() -> None:
    run = Run(FakeContext(parallel=1), reuse_cache=False)
    for _ in range(2):
        again = job([10, 11, 12], max_tokens=1)
        run.submit(again)
        run.until_idle()
        assert run.ending(again).cached_tokens == 0
    assert [len(rows) for rows in run.context.decodes] == [3, 3]


def test_a_full_kv_cache_drops_idle_caches_and_retries_the_step() -> None:
    run = Run(FakeContext(parallel=2))
    run.submit(job([10, 11], max_tokens=1), job([20, 21], max_tokens=1))
    run.until_idle()
    assert run.context.cells[1]  # sequence 1 is idle and still holds its cache
    run.context.full = 1
    later = job([70, 71, 72], max_tokens=2)  # on sequence 0, the lowest free id
    run.submit(later)
    run.until_idle()
    assert run.text(later) == "<73><74>" and run.ending(later).finish_reason == "length"
    assert run.batcher.sequences[1].cached == [] and run.context.cells[1] == {}


def test_a_full_kv_cache_with_nothing_idle_ends_the_largest_choice() -> None:
    run = Run(FakeContext(parallel=2))
    small, large = job([1], max_tokens=10), job(list(range(40, 50)), max_tokens=10)
    run.submit(small, large)
    run.step(2)
    run.context.full = 1
    run.step()
    assert run.ending(large).finish_reason == "kv_full"
    run.until_idle()
    assert run.text(small) == "".join(f"<{t}>" for t in range(2, 12))


def test_choices_of_one_request_evaluate_their_prompt_once() -> None:
    run = Run(FakeContext(parallel=3))
    choices = [job([30, 31, 32], max_tokens=2, index=i) for i in range(3)]
    run.submit(*choices)
    run.until_idle()
    prompt_rows = [r for r in run.context.decodes[0]]
    assert [(r.seq_id, r.token) for r in prompt_rows] == [(0, 30), (0, 31), (0, 32)]
    assert [source for source, *_ in run.context.shares] == [0, 0]  # the followers take the leader's cells
    assert [run.text(c, c.plan.index) for c in choices] == ["<33><34>"] * 3


def test_scoring_a_prompt_sends_its_logprobs_then_ends_without_generating() -> None:
    run = Run(FakeContext())
    scored = job([4, 5, 6], max_tokens=0, logprobs=0, prompt_logprobs=True)
    run.submit(scored)
    run.until_idle()
    first, last = run.chunks[scored.generation]
    assert [(e.token, e.logprob) for e in first.prompt_logprobs] == [(4, None), (5, -0.0), (6, -1.0)]
    assert last.finish_reason == "length" and last.completion_tokens == 0 and not last.text
    assert run.reports[-1].sampled == 0


def test_ignore_eos_generates_past_the_end_of_generation_token() -> None:
    run = Run(FakeContext())
    past = job([98], max_tokens=3, ignore_eos=True)
    run.submit(past)
    run.until_idle()
    assert run.text(past) == f"<99><{END}><1>" and run.ending(past).finish_reason == "length"


def test_a_failed_decode_ends_every_choice_with_an_error_and_the_loop_goes_on() -> None:
    run = Run(FakeContext(parallel=2))
    one, two = job([1], max_tokens=5), job([2], max_tokens=5)
    run.submit(one, two)
    run.step()
    run.context.fail = True
    run.step()
    for each in (one, two):
        ending = run.ending(each)
        assert ending.finish_reason == "error" and "the fake decode failed" in (ending.error or "")
    assert run.context.cells == {} and not any(s.busy for s in run.batcher.sequences)
    recovered = job([3], max_tokens=1)
    run.submit(recovered)
    run.until_idle()
    assert run.text(recovered) == "<4>"


@pytest.mark.parametrize("stop", [["<9>"], ["<9><1"]])
def test_stop_strings_end_the_choice_and_never_leak(stop: list[str]) -> None:
    run = Run(FakeContext())
    stopped = job([6], max_tokens=10, stop=stop)
    run.submit(stopped)
    run.until_idle()
    assert run.text(stopped) == "<7><8>"
    assert run.ending(stopped).finish_reason == "stop" and run.ending(stopped).stop_sequence == stop[0]


def test_told_to_stop_the_loop_ends() -> None:
    run = Run(FakeContext())
    run.batcher.submit(None)
    assert run.batcher.cycle(wait=False) is False


def test_choices_with_different_lora_scales_take_turns_and_never_share_a_decode() -> None:
    run = Run(FakeContext(parallel=4))
    base = job([5, 6], max_tokens=3, adapters=())
    tuned = [job([20 + n], max_tokens=3, adapters=(1.0,)) for n in range(2)]
    other = job([40], max_tokens=3, adapters=(0.5,))
    run.submit(base, *tuned, other)
    run.until_idle()
    assert run.text(base) == "<7><8><9>" and run.text(other) == "<41><42><43>"
    assert [run.text(each) for each in tuned] == ["<21><22><23>", "<22><23><24>"]
    for rows, scales in zip(run.context.decodes, run.context.decoded_with, strict=True):
        wanted = {0: (), 1: (1.0,), 2: (1.0,), 3: (0.5,)}
        assert {wanted[row.seq_id] for row in rows} == {scales}  # one set of scales per decode
    assert len(run.context.decodes) == 3 * 3  # three sets, three steps each (prompt + 2 tokens)


def test_lora_sets_keep_their_turn_for_a_stretch_then_the_longest_waiting_goes() -> None:
    run = Run(FakeContext(parallel=3, n_ctx=128))
    long = [job([1], max_tokens=40, adapters=()), job([2], max_tokens=40, adapters=(1.0,))]
    run.submit(*long)
    run.step(2 * ADAPTER_TURN)
    late = job([3], max_tokens=40, adapters=(0.5,))
    run.submit(late)
    run.until_idle()
    turns = [scales for scales, _ in groupby(run.context.decoded_with)]
    stretches = [len(list(steps)) for _, steps in groupby(run.context.decoded_with)]
    assert stretches[:3] == [ADAPTER_TURN] * 3
    # The latecomer has waited longest (it never ran): it goes before the base set's second turn.
    assert turns[:4] == [(), (1.0,), (0.5,), ()]


def test_an_adapter_loaded_between_steps_serves_the_choices_queued_after_it() -> None:
    run = Run(FakeContext(parallel=2))
    failures: list[dict[int, str]] = []
    run.batcher.submit(AdapterChange([(1, "/a.gguf"), (2, "/bad.gguf")], failures.append))
    tuned = job([5], max_tokens=2, adapters=(0.0, 1.0))
    run.submit(tuned)
    run.until_idle()
    assert run.context.loaded_adapters == {1: "/a.gguf"}
    assert list(failures[0]) == [2] and "/bad.gguf" in failures[0][2]
    assert run.text(tuned) == "<6><7>" and run.context.decoded_with[0] == (0.0, 1.0)
    failed = job([5], max_tokens=2, adapters=(0.0, 0.0, 1.0))  # its file did not load here
    run.context.freed_adapters.add(2)
    run.submit(failed)
    run.step()
    assert run.ending(failed).finish_reason == "error" and "index 2 is not loaded" in str(
        run.ending(failed).error
    )


def test_an_unloaded_adapter_is_freed_only_once_no_running_choice_decodes_with_it() -> None:
    run = Run(FakeContext(parallel=2, n_ctx=128))
    running = job([5], max_tokens=6, adapters=(1.0,))
    run.submit(running)
    run.step()
    done: list[dict[int, str]] = []
    run.batcher.submit(AdapterChange([(0, None)], done.append))
    run.step(2)
    assert done == [{}] and run.context.freed_adapters == set()  # the stream keeps its adapter
    run.until_idle()
    assert run.text(running) == "<6><7><8><9><10><11>"
    run.step()
    assert run.context.freed_adapters == {0}


def test_a_cached_prompt_is_reused_only_under_the_same_lora_scales() -> None:
    run = Run(FakeContext(parallel=1))
    first = job([10, 11, 12, 13], max_tokens=1, adapters=(1.0,))
    run.submit(first)
    run.until_idle()
    same_prompt_base = job([10, 11, 12, 13, 14], max_tokens=1, adapters=())
    run.submit(same_prompt_base)
    run.until_idle()
    assert run.ending(same_prompt_base).cached_tokens == 0  # its cells held the adapter's values
    again = job([10, 11, 12, 13, 14, 15], max_tokens=1, adapters=())
    run.submit(again)
    run.until_idle()
    assert run.ending(again).cached_tokens == 5
