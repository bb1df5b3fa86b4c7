"""Steps' figures summed on the hub: written once a second or when idle, and equal to writing each step."""

from __future__ import annotations

from collections import Counter

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from app.telemetry.step_tally import FLUSH_SECONDS, StepTally, observe_counts

BUCKETS = (1, 2, 4, 8, 512)


def test_observing_counts_exposes_what_observing_each_value_does() -> None:
    values = [1, 1, 3, 8, 9, 600, 2, 512, 513, 1]
    one_by_one, summed = CollectorRegistry(), CollectorRegistry()
    each = Histogram("steps", "batch sizes", buckets=BUCKETS, registry=one_by_one)
    for value in values:
        each.observe(value)
    observe_counts(Histogram("steps", "batch sizes", buckets=BUCKETS, registry=summed), Counter(values))
    assert samples(summed) == samples(one_by_one)
    assert b'steps_bucket{le="+Inf"} 10.0' in samples(summed)


def samples(registry: CollectorRegistry) -> list[bytes]:
    """The exposition's lines but the creation time (each histogram's own)."""
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_steps_are_written_once_a_second_and_whenever_the_engine_goes_idle() -> None:
    written: list[tuple[dict[int, int], int]] = []
    clock = Clock()
    tally = StepTally(lambda sizes, sampled: written.append((dict(sizes), sampled)), clock)
    for _ in range(5):
        clock.now += 0.01
        tally.add(1, 1, idle=False)
    assert written == []  # a stream's steps wait for the second to pass
    clock.now += FLUSH_SECONDS
    tally.add(3, 2, idle=False)
    assert written == [({1: 5, 3: 1}, 7)]
    tally.add(1, 1, idle=False)
    tally.add(0, 0, idle=True)  # the last choice ended: what was summed is written at once
    assert written[-1] == ({1: 1}, 1)
    tally.add(0, 0, idle=True)  # nothing new: nothing written
    assert len(written) == 2
