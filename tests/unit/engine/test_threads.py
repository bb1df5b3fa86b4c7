"""The thread governor's decisions, from made-up clocks: down under contention, back up once it ends."""

from __future__ import annotations

from app.engine import threads
from app.engine.threads import ThreadGovernor

CORES = 2


class Machine:
    """Two cores, this process's threads and maybe a busy neighbour; clocks advanced by hand."""

    def __init__(self) -> None:
        self.wall = self.cpu = self.idle = 0.0
        self.neighbour = False

    def decode(self, governor: ThreadGovernor, seconds: float) -> None:
        """One decode of `seconds`: the process gets its threads' share of the cores, the rest idles."""
        started = governor.start()
        wanted = governor.threads + (1 if self.neighbour else 0)
        had = governor.threads * min(1.0, CORES / wanted) * 0.97
        self.wall += seconds
        self.cpu += seconds * had
        self.idle += seconds * max(0.0, CORES - wanted)
        governor.finish(started)


def make(most: int = 2) -> tuple[ThreadGovernor, Machine, list[int]]:
    machine, applied = Machine(), list[int]()
    governor = ThreadGovernor(
        most, applied.append, clock=lambda: machine.wall, cpu=lambda: machine.cpu, idle=lambda: machine.idle
    )
    return governor, machine, applied


def run(governor: ThreadGovernor, machine: Machine, seconds: float) -> None:
    for _ in range(round(seconds / 0.01)):
        machine.decode(governor, 0.01)


def test_a_quiet_machine_keeps_every_thread() -> None:
    governor, machine, applied = make()
    run(governor, machine, 30)
    assert governor.threads == 2 and applied == []


def test_contention_steps_down_and_blind_probes_back_off() -> None:
    governor, machine, applied = make()
    machine.neighbour = True  # a busy process takes a third of the cores
    run(governor, machine, threads.WINDOW)
    assert governor.threads == 1 and applied == [1]
    run(governor, machine, threads.FIRST_PROBE + 2 * threads.WINDOW)
    assert applied[:3] == [1, 2, 1]  # with no idle core, one more thread was tried blindly, and dropped
    run(governor, machine, threads.FIRST_PROBE * 1.5)
    assert applied.count(2) == 1  # it now waits twice as long before the next blind try
    run(governor, machine, threads.FIRST_PROBE)
    assert applied.count(2) == 2


def test_an_idle_core_brings_every_thread_back_at_once() -> None:
    governor, machine, applied = make()
    machine.neighbour = True
    run(governor, machine, 40)  # long enough for the blind probes to back off far
    assert governor.threads == 1
    machine.neighbour = False
    run(governor, machine, 2 * threads.WINDOW)  # the idle core shows within a window
    assert governor.threads == 2 and applied[-1] == 2
    run(governor, machine, 10)
    assert governor.threads == 2


def test_after_a_long_idle_it_starts_again_with_every_thread() -> None:
    governor, machine, applied = make()
    machine.neighbour = True
    run(governor, machine, threads.WINDOW)
    assert governor.threads == 1
    machine.wall += threads.FORGET + 1  # nothing to decode for a while
    run(governor, machine, 0.1)
    assert governor.threads == 2 and applied == [1, 2]


def test_one_thread_is_left_alone() -> None:
    governor, machine, applied = make(most=1)
    machine.neighbour = True
    run(governor, machine, 5)
    assert governor.threads == 1 and applied == []
