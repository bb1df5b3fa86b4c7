"""Fewer llama.cpp threads while another process competes for the cores, all of them again once it leaves.

llama.cpp's threads wait for each other at every barrier of the graph, spinning. When
a busy neighbour holds one of the cores, the thread that lost its core holds up the
rest, and a worker decodes at a fifth of its speed; with one thread fewer it keeps
most of it. The governor sees contention as the cores the process actually got while
decoding (CPU seconds over wall seconds, from getrusage) falling well short of its
thread count, steps down, and now and then tries a thread more to see whether the
neighbour has gone, backing off while it has not.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable

WINDOW = 0.5  # seconds of decoding per judgement
SHORT = 0.75  # contention: fewer than this share of the threads' cores were had
FIRST_PROBE = 5.0  # seconds before trying a thread more; doubles while the neighbour stays
LAST_PROBE = 60.0
FORGET = 10.0  # idle seconds after which a past neighbour is forgotten: start again with every thread


def process_cpu_seconds() -> float:
    """CPU time of every thread of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ThreadGovernor:
    """Chooses the thread count between steps from what the last decodes got of the cores."""

    def __init__(
        self,
        most: int,
        apply: Callable[[int], object],
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = process_cpu_seconds,
    ) -> None:
        self.most = most
        self.threads = most
        self.clock = clock
        self._apply, self._cpu = apply, cpu
        self._wall = self._used = 0.0
        self._probing_from: int | None = None
        self._wait = FIRST_PROBE
        self._next_probe = 0.0
        self._last_decode = 0.0

    def start(self) -> tuple[float, float]:
        """Read the clocks before a decode."""
        now = self.clock()
        if self.threads < self.most and now - self._last_decode > FORGET:
            self._set(self.most)
            self._probing_from, self._wait, self._wall, self._used = None, FIRST_PROBE, 0.0, 0.0
        self._last_decode = now
        return now, self._cpu()

    def finish(self, started: tuple[float, float]) -> None:
        """Add one decode (begun at `started`) to the window, and judge the window when full."""
        if self.most <= 1:
            return
        wall, used = self.clock() - started[0], self._cpu() - started[1]
        self._wall += wall
        self._used += used
        if self._wall >= WINDOW:
            self._judge(self._used / self._wall)
            self._wall = self._used = 0.0

    def _judge(self, cores: float) -> None:
        now = self.clock()
        starved = cores < SHORT * self.threads
        if self._probing_from is not None:
            if starved:  # the neighbour is still there: back down, and wait longer next time
                self._set(self._probing_from)
                self._wait = min(self._wait * 2, LAST_PROBE)
            else:
                self._wait = FIRST_PROBE
            self._probing_from = None
            self._next_probe = now + self._wait
        elif starved and self.threads > 1:
            self._set(max(1, min(self.threads - 1, math.floor(cores + 0.25))))
            self._next_probe = now + self._wait
        elif self.threads < self.most and now >= self._next_probe:
            self._probing_from = self.threads
            self._set(self.threads + 1)

    def _set(self, threads: int) -> None:
        if threads != self.threads:
            self.threads = threads
            self._apply(threads)
