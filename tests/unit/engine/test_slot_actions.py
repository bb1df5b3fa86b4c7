"""Slot actions in the batcher's loop: done once the sequence is idle, answered whatever happens."""

from __future__ import annotations

from pathlib import Path

from app.engine.cache.slot_actions import SlotAction
from app.engine.cache.slot_files import SlotFileError
from tests.unit.engine.fake_context import FakeContext, job
from tests.unit.engine.test_batcher import Run


def test_an_action_waits_for_its_sequences_choice_then_saves_and_restores(tmp_path: Path) -> None:
    run = Run(FakeContext(parallel=1))
    outcomes: list[object] = []
    asked = job(list(range(10, 20)), max_tokens=3)
    run.submit(asked)
    run.step()  # the choice holds sequence 0
    run.batcher.submit(SlotAction("save", 0, tmp_path / "kept.bin", "fp", outcomes.append))
    run.step()
    assert outcomes == []  # deferred while the choice runs
    run.until_idle()
    assert outcomes[0]["n_saved"] == len(run.batcher.sequences[0].cached) > 10  # type: ignore[index]
    run.batcher.submit(SlotAction("erase", 0, None, "fp", outcomes.append))
    run.step()
    assert run.batcher.sequences[0].cached == [] and outcomes[1] == {"n_erased": 12}
    run.batcher.submit(SlotAction("restore", 0, tmp_path / "kept.bin", "fp", outcomes.append))
    run.step()
    assert outcomes[2]["n_restored"] == 12 and len(run.batcher.sequences[0].cached) == 12  # type: ignore[index]


def test_a_failing_action_is_answered_and_the_loop_and_its_choices_go_on(tmp_path: Path) -> None:
    context = FakeContext(parallel=2)
    run = Run(context)
    streaming = job([1, 2], max_tokens=6)
    run.submit(streaming)
    run.step()

    def broken(seq_id: int, partial: bool = False) -> bytes:
        raise ValueError("llama.cpp said no")

    context.save_state = broken  # type: ignore[method-assign]
    outcomes: list[object] = []
    run.batcher.submit(SlotAction("save", 1, tmp_path / "x.bin", "fp", outcomes.append))
    run.batcher.submit(SlotAction("save", 5, tmp_path / "y.bin", "fp", outcomes.append))
    run.until_idle()
    assert [str(o) for o in outcomes] == ["it failed in llama.cpp (see the server log)", "Invalid slot ID"]
    assert all(isinstance(o, SlotFileError) for o in outcomes)
    assert run.text(streaming) == "<3><4><5><6><7><8>"  # the stream beside it was not touched
