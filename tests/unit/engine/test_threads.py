"""The thread governor's decisions, from made-up clocks: down under contention, back up once it ends."""

from __future__ import annotations

from app.engine import threads
from app.engine.threads import ThreadGovernor


class Clocks:
    """A wall clock and a process CPU clock the test advances by hand."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def decode(self, governor: ThreadGovernor, seconds: float, cores: float) -> None:
        """One decode of `seconds` during which the process got `cores` cores."""
        started = governor.start()
        self.wall += seconds
        self.cpu += seconds * cores
        governor.finish(started)


def make(most: int = 2) -> tuple[ThreadGovernor, Clocks, list[int]]:
    clocks, applied = Clocks(), []
    governor = ThreadGovernor(most, applied.append, clock=lambda: clocks.wall, cpu=lambda: clocks.cpu)
    return governor, clocks, applied


def run(
    governor: ThreadGovernor,
    clocks: Clocks,
    seconds: float,
    cores: float | None = None,
    *,
    neighbour: bool = False,
) -> None:
    """Decode for `seconds`; the cores had are `cores`, or what a neighbour leaves of two cores."""
    for _ in range(round(seconds / 0.01)):
        had = (
            cores
            if cores is not None
            else (
                min(governor.threads, 2 * governor.threads / (governor.threads + 1))
                if neighbour
                else governor.threads * 0.97
            )
        )
        clocks.decode(governor, 0.01, had)


def test_a_quiet_machine_keeps_every_thread() -> None:
    governor, clocks, applied = make()
    run(governor, clocks, 30)
    assert governor.threads == 2 and applied == []


def test_contention_steps_down_and_probes_back_with_backoff() -> None:
    governor, clocks, applied = make()
    run(governor, clocks, threads.WINDOW, neighbour=True)  # a busy process takes a third of the cores
    assert governor.threads == 1 and applied == [1]
    run(governor, clocks, threads.FIRST_PROBE + 2 * threads.WINDOW, neighbour=True)
    assert applied[:3] == [1, 2, 1]  # after the wait one more thread was tried, and dropped again
    run(governor, clocks, threads.FIRST_PROBE * 1.5, neighbour=True)
    assert applied.count(2) == 1  # it now waits twice as long before the next try
    run(governor, clocks, threads.FIRST_PROBE, neighbour=True)
    assert applied.count(2) == 2


def test_it_returns_to_every_thread_when_the_neighbour_leaves() -> None:
    governor, clocks, applied = make()
    run(governor, clocks, threads.WINDOW, cores=1.2)
    assert governor.threads == 1
    run(
        governor,
        clocks,
        threads.FIRST_PROBE + 2 * threads.WINDOW,
        cores=1.0 if governor.threads == 1 else 1.95,
    )
    run(governor, clocks, 10, cores=1.95)
    assert governor.threads == 2 and applied[-1] == 2


def test_one_thread_is_left_alone() -> None:
    governor, clocks, applied = make(most=1)
    run(governor, clocks, 5, cores=0.3)
    assert governor.threads == 1 and applied == []


def test_after_a_long_idle_it_starts_again_with_every_thread() -> None:
    governor, clocks, applied = make()
    run(governor, clocks, threads.WINDOW, neighbour=True)
    assert governor.threads == 1
    clocks.wall += threads.FORGET + 1  # nothing to decode for a while
    run(governor, clocks, 0.1)
    assert governor.threads == 2 and applied == [1, 2]
