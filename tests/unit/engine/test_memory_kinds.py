"""The batcher on memories that cannot be cut anywhere: a sliding window and a recurrent state.

The fake context asserts, at every decode, that the memory holds what the token needs (the
window before it, the state folded up to it), so a batcher that resumed where the memory
cannot would fail here even though the counting answers would look right.
"""

from __future__ import annotations

from app.engine.batcher import Batcher
from app.engine.batcher_settings import BatcherSettings
from app.engine.memory import MemoryKind
from app.engine.types import DraftLimits
from tests.unit.engine.fake_context import FakeContext, job
from tests.unit.engine.test_batcher import Run

PROMPT = list(range(1, 41))  # the counting model answers 41, 42, ...
SWA = MemoryKind(window=8, sliding=8)
RECURRENT = MemoryKind(recurrent=True)


def run_on(memory: MemoryKind, checkpoints: int = 8, cache_ram: int = 0, **context: object) -> Run:
    fake = FakeContext(**{"parallel": 1, "n_ctx": 256, "n_batch": 64, "memory": memory, **context})  # type: ignore[arg-type]  # test overrides
    run = Run(fake)
    settings = BatcherSettings(16, True, 0, checkpoints=checkpoints, cache_ram_bytes=cache_ram)
    run.batcher = Batcher(fake, settings, run._deliver)
    return run


def evaluated_after(run: Run, decodes_before: int) -> list[int]:
    """The prompt tokens evaluated for the request submitted after `decodes_before` decodes."""
    first = run.context.decodes[decodes_before]
    return [row.token for row in first]


def answer(run: Run, prompt: list[int], max_tokens: int = 3) -> tuple[str, int, list[int]]:
    """Its text, its cached tokens, and the tokens its first decode evaluated."""
    before = len(run.context.decodes)
    request = job(prompt, max_tokens=max_tokens)
    run.submit(request)
    run.until_idle()
    return run.text(request), run.ending(request).cached_tokens, evaluated_after(run, before)


def test_a_window_that_moved_on_resumes_only_where_it_still_holds_the_past() -> None:
    run = run_on(SWA, swa_cells=12)
    answer(run, PROMPT, max_tokens=20)  # 40 + 19 cells: the window has moved past position 40
    held = PROMPT + list(range(41, 60))
    # The next turn: the live window resumes it.
    text, cached, evaluated = answer(run, [*held, 77, 78])
    assert (text, cached, evaluated) == ("<79><80><81>", 59, [77, 78])
    # A prompt sharing only an early part: the window no longer holds it, the checkpoint does.
    run = run_on(SWA, swa_cells=12)
    answer(run, PROMPT, max_tokens=20)
    text, cached, evaluated = answer(run, [*PROMPT[:38], 5])
    assert cached == 36 and evaluated == [37, 38, 5] and text == "<6><7><8>"
    assert run.context.partial_loads  # a checkpoint was restored
    # Earlier than any checkpoint: evaluated in full (the fake would fail a decode otherwise).
    text, cached, _ = answer(run, [*PROMPT[:20], 3])
    assert cached == 0 and text == "<4><5><6>"


def test_without_checkpoints_a_window_that_moved_on_evaluates_the_prompt_again() -> None:
    run = run_on(SWA, checkpoints=0, swa_cells=12)
    answer(run, PROMPT, max_tokens=20)
    text, cached, evaluated = answer(run, [*PROMPT[:38], 5])
    assert cached == 0 and evaluated[0] == 1 and text == "<6><7><8>"


def test_a_recurrent_state_resumes_whole_or_from_a_checkpoint() -> None:
    run = run_on(RECURRENT)
    text, _, _ = answer(run, PROMPT)  # 41, 42, 43: the state folds the prompt, 41 and 42
    assert text == "<41><42><43>"
    # The next turn extends everything the state holds: it resumes as it is.
    text, cached, evaluated = answer(run, [*PROMPT, 41, 42, 43, 9])
    assert (cached, evaluated, text) == (42, [43, 9], "<10><11><12>")
    # The same prompt again: the state cannot be cut back one token; the checkpoint 4 before its end.
    run = run_on(RECURRENT)
    answer(run, PROMPT)
    text, cached, evaluated = answer(run, PROMPT)
    assert (cached, evaluated, text) == (36, [37, 38, 39, 40], "<41><42><43>")
    # Diverging early: from the start.
    text, cached, evaluated = answer(run, [*PROMPT[:10], 3])
    assert cached == 0 and evaluated[0] == 1 and text == "<4><5><6>"


def test_routing_hears_of_the_blocks_a_recurrent_sequence_can_resume_into() -> None:
    run = run_on(RECURRENT)
    prompt = list(range(1, 98))  # 97 tokens: checkpoints at 93 (block 1) and 29 (block 0)
    answer(run, prompt)
    ((row, hashes),) = [change for report in run.reports[-1:] for change in report.blocks]
    assert row == 0 and len(hashes) == 1 and hashes[0] != 0  # block 0: a checkpoint at 29 inside it


def test_choices_of_one_prompt_share_a_recurrent_state() -> None:
    run = run_on(RECURRENT, parallel=2)
    first, second = job(PROMPT, max_tokens=3, index=0), job(PROMPT, max_tokens=3, index=1)
    second.generation = first.generation
    run.submit(first, second)
    run.until_idle()
    assert run.text(first, 0) == run.text(first, 1) == "<41><42><43>"
    assert run.context.shares  # the second took the first's state rather than evaluating it


def test_drafts_are_off_on_a_recurrent_state_and_a_broken_window_is_evaluated_again() -> None:
    # After 10 the n-grams propose 11, 12, 50...: the counting model keeps 11 and 12, refuses 50.
    prompt = [10, 11, 12, 50, 51, 52, 53, 54] * 3 + list(range(1, 10))
    run = run_on(RECURRENT)
    request = job(prompt, max_tokens=6, drafts=DraftLimits(4))
    run.submit(request)
    run.until_idle()
    assert run.text(request) == "<10><11><12><13><14><15>" and not any(r.drafted for r in run.reports)
    # A window that moves on as soon as a batch is in (as llama.cpp's does when it splits a batch
    # into micro-batches) forgot what the refused draft pushed out: the history is evaluated again.
    run = run_on(SWA, swa_cells=SWA.window - 1)
    request = job(prompt, max_tokens=12, drafts=DraftLimits(4))
    run.submit(request)
    run.until_idle()
    assert run.text(request) == "".join(f"<{t}>" for t in range(10, 22))
    assert sum(r.drafted for r in run.reports) > sum(r.accepted for r in run.reports)
    starts = [i for i, rows in enumerate(run.context.decodes) if rows[0].position == 0]
    assert len(starts) == 2  # the prompt, then the whole history once more after the refusal


def test_a_recurrent_state_kept_in_host_memory_comes_back_with_its_checkpoints() -> None:
    prompt = list(range(1, 81))
    run = run_on(RECURRENT, cache_ram=1 << 20)
    answer(run, prompt)
    answer(run, [90, 91, 92])  # takes the only sequence: the state and its checkpoints are kept
    text, cached, evaluated = answer(run, prompt)  # asked again: from the checkpoint kept with it
    assert (cached, evaluated, text) == (76, [77, 78, 79, 80], "<81><82><83>")


def test_a_window_kept_in_host_memory_holds_only_its_last_window() -> None:
    # llama.cpp saves only the cells the next token attends to: the state resumes its whole history
    # (or a checkpoint), not a cut a little before its end, though the live cells could.
    prompt = list(range(1, 81))
    run = run_on(SWA, cache_ram=1 << 20, swa_cells=40)
    answer(run, prompt, max_tokens=10)  # holds 89 tokens; the live window resumes cuts from 57 on
    answer(run, [90, 91, 92])  # takes the only sequence: the state is kept
    text, cached, evaluated = answer(run, [*prompt, 81, 82, 83, 84, 5])  # shares 84 of the 89
    assert (cached, evaluated[0], text) == (76, 77, "<6><7><8>")  # the checkpoint, not a cut at 84
