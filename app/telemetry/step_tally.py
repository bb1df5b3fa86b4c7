"""The engine's per-step figures, summed on the hub and written to the shared metrics once a second.

Every step of a stream would otherwise write the batch-size histogram, the decode counter
and the worker board: each write of prometheus_client's multiprocess mode takes a lock,
checks the pid and packs into a memory map, and it runs on the hub while llama.cpp decodes
the next token on the same cores (about 3 % of a lone stream's speed on two cores).
Summed, they are written at most once a `FLUSH_SECONDS` and whenever the engine goes idle,
so a figure read after a request has ended already counts it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from prometheus_client import Histogram

FLUSH_SECONDS = 1.0


def observe_counts(histogram: Histogram, counts: Counter[int]) -> None:
    """As `histogram.observe(value)` once per count of each value, in one write per bucket.

    prometheus_client has no observe-many; this writes the histogram's own sum and bucket
    values (its `_sum`, `_buckets`, `_upper_bounds`, stable across its releases and pinned in
    requirements.txt), and a unit test holds it equal to repeated `observe`.
    """
    if not counts:
        return
    histogram._sum.inc(sum(value * n for value, n in counts.items()))
    per_bucket = [0] * len(histogram._upper_bounds)
    for value, n in counts.items():
        bucket = next(i for i, bound in enumerate(histogram._upper_bounds) if value <= bound)
        per_bucket[bucket] += n
    for bucket, n in enumerate(per_bucket):
        if n:
            histogram._buckets[bucket].inc(n)


class StepTally:
    """Steps' batch sizes and sampled tokens since the last write; `write` is told where they go."""

    def __init__(
        self,
        write: Callable[[Counter[int], int], object],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`write(batch sizes with their step counts, tokens sampled)` records a sum."""
        self._write, self._clock = write, clock
        self._sizes: Counter[int] = Counter()
        self._sampled = 0
        self._written_at = clock()

    def add(self, decoded: int, sampled: int, idle: bool) -> None:
        """One step's figures (`idle`: no sequence holds a choice after it): written if due."""
        if decoded:
            self._sizes[decoded] += 1
        self._sampled += sampled
        now = self._clock()
        if idle or now - self._written_at >= FLUSH_SECONDS:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        """Write what was summed, if anything."""
        self._written_at = self._clock() if now is None else now
        if self._sizes or self._sampled:
            sizes, sampled = self._sizes, self._sampled
            self._sizes, self._sampled = Counter(), 0
            self._write(sizes, sampled)
