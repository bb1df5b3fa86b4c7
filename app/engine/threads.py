"""Fewer llama.cpp threads while another process competes for the cores, all of them again once it leaves.

llama.cpp's threads wait for each other at every barrier of the graph, spinning. When
a busy neighbour holds one of the cores, the thread that lost its core holds up the
rest, and a worker decodes at a fifth of its speed; with one thread fewer it keeps
most of it. The governor sees contention as the cores the process actually got while
decoding (CPU seconds over wall seconds, from getrusage) falling well short of its
thread count, and steps down. It steps back up as soon as the machine shows an idle
core (from /proc/stat) or, failing that sign, tries a thread more now and then,
backing off while the neighbour stays.
"""

from __future__ import annotations

import math
import os
import resource
import time
from collections.abc import Callable

WINDOW = 0.5  # seconds of decoding per judgement
SHORT = 0.75  # contention: fewer than this share of the threads' cores were had
IDLE = 0.6  # cores' worth of idle CPU that tells the neighbour has gone
FIRST_PROBE = 5.0  # seconds before trying a thread more blindly; doubles while the neighbour stays
LAST_PROBE = 60.0
FORGET = 10.0  # idle seconds after which a past neighbour is forgotten: start again with every thread


def process_cpu_seconds() -> float:
    """CPU time of every thread of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def idle_cpu_seconds() -> float:
    """Idle time so far of the CPUs this process may run on (0 where /proc/stat cannot tell)."""
    mine = {f"cpu{n}" for n in os.sched_getaffinity(0)}
    ticks = 0
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                if not line.startswith("cpu"):
                    break  # the per-CPU lines come first; the rest (interrupts...) is long
                fields = line.split()
                if fields[0] in mine:
                    ticks += int(fields[4]) + int(fields[5])  # idle + iowait
    except (OSError, ValueError, IndexError):
        return 0.0
    return ticks / _TICKS_PER_SECOND


class ThreadGovernor:
    """Chooses the thread count between steps from what the last decodes got of the cores."""

    def __init__(
        self,
        most: int,
        apply: Callable[[int], object],
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = process_cpu_seconds,
        idle: Callable[[], float] = idle_cpu_seconds,
    ) -> None:
        self.most = most
        self.threads = most
        self.clock = clock
        self._apply, self._cpu, self._idle = apply, cpu, idle
        self._wall = self._used = 0.0
        self._window_began: tuple[float, float] | None = None  # clock and idle CPU seconds
        self._probing_from: int | None = None
        self._wait = FIRST_PROBE
        self._next_probe = 0.0
        self._last_decode = 0.0

    def start(self) -> tuple[float, float]:
        """Read the clocks before a decode."""
        now = self.clock()
        if self.threads < self.most and now - self._last_decode > FORGET:
            self._set(self.most)
            self._probing_from, self._wait = None, FIRST_PROBE
            self._wall, self._used, self._window_began = 0.0, 0.0, None
        self._last_decode = now
        if self._window_began is None and self.most > 1:
            self._window_began = now, self._idle()
        return now, self._cpu()

    def finish(self, started: tuple[float, float]) -> None:
        """Add one decode (begun at `started`) to the window, and judge the window when full."""
        if self.most <= 1:
            return
        now = self.clock()
        self._wall += now - started[0]
        self._used += self._cpu() - started[1]
        if self._wall >= WINDOW and self._window_began is not None:
            began, idle = self._window_began
            self._judge(self._used / self._wall, (self._idle() - idle) / max(now - began, 1e-9))
            self._wall, self._used, self._window_began = 0.0, 0.0, None

    def _judge(self, cores: float, idle_cores: float) -> None:
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
        elif self.threads < self.most and (idle_cores >= IDLE or now >= self._next_probe):
            self._probing_from = self.threads
            self._set(self.threads + 1)

    def _set(self, threads: int) -> None:
        if threads != self.threads:
            self.threads = threads
            self._apply(threads)
