"""The engine's queue with batch (low-priority) requests: interactive ones first,, taking sequences back."""

from __future__ import annotations

from app.engine.choice import Job
from app.engine.engine import Engine
from app.engine.types import ChoicePlan
from tests.unit.conftest import make_config


class RecordingBatcher:
    """Stands in for the batcher: records which generation each free sequence went to."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def submit(self, job: Job) -> None:
        self.jobs.append(job)


def engine_of(parallel: int) -> tuple[Engine, RecordingBatcher]:
    engine = Engine(make_config(LLM_PARALLEL=str(parallel), LLM_MAX_QUEUE="8"))
    batcher = RecordingBatcher()
    engine._batcher = batcher  # type: ignore[assignment]  # no model: the queue alone is under test
    return engine, batcher


def request() -> list[ChoicePlan]:
    return [ChoicePlan(prompt_tokens=[1, 2, 3], max_tokens=4)]


def test_interactive_requests_wait_ahead_of_batch_lines() -> None:
    engine, batcher = engine_of(1)
    running = engine.submit(request())
    batch_line = engine.submit(request(), low_priority=True)
    interactive = engine.submit(request())
    assert [job.generation for job in batcher.jobs] == [running]
    engine._free += 1  # the first request's sequence comes back
    engine._dispatch()
    assert [job.generation for job in batcher.jobs] == [running, interactive]
    assert not batch_line.started and not batch_line.preempted


def test_an_interactive_request_that_would_wait_takes_a_batch_lines_sequence() -> None:
    engine, batcher = engine_of(2)
    older = engine.submit(request(), low_priority=True)
    newer = engine.submit(request(), low_priority=True)
    assert older.started and newer.started
    interactive = engine.submit(request())
    assert newer.preempted and newer.cancelled  # the latest started makes way
    assert not older.preempted and not older.cancelled
    assert interactive.queued  # it waits one step, for the cancelled line's sequence
    engine._free += 1
    engine._dispatch()
    assert batcher.jobs[-1].generation is interactive


def test_interactive_requests_never_preempt_each_other() -> None:
    engine, _ = engine_of(1)
    first = engine.submit(request())
    engine.submit(request())
    assert not first.cancelled and not first.preempted


def prioritised(priority: int, choices: int = 1) -> list[ChoicePlan]:
    return [
        ChoicePlan(prompt_tokens=[1, 2, 3], max_tokens=4, priority=priority, index=i) for i in range(choices)
    ]


def test_waiting_requests_start_by_priority_then_arrival_and_never_preempt() -> None:
    engine, batcher = engine_of(1)
    running = engine.submit(prioritised(5))
    later = engine.submit(prioritised(5))
    urgent = engine.submit(prioritised(-3, choices=2))  # both its choices, together
    batch_line = engine.submit(request(), low_priority=True)
    default = engine.submit(prioritised(0))
    also_urgent = engine.submit(prioritised(-3))
    assert not running.cancelled and not running.preempted  # a running request is never pre-empted
    order = []
    for _ in range(6):
        engine._free += 1
        engine._dispatch()
        order.append(batcher.jobs[-1].generation)
    assert order == [urgent, urgent, also_urgent, default, later, batch_line]


def test_queue_position_is_behind_equals_and_ahead_of_the_rest() -> None:
    from app.engine.scheduling import queue_position

    waiting = [(False, -1), (False, 0), (False, 0), (False, 4), (True, -9)]
    assert queue_position(waiting, (False, 0)) == 3
    assert queue_position(waiting, (False, -5)) == 0
    assert queue_position(waiting, (True, -10)) == 4  # a batch line, behind every interactive one
    assert queue_position(waiting, (False, 99)) == 4
    assert queue_position([], (False, 0)) == 0
