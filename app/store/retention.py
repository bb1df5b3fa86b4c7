"""Retention (LLM_STORE_TTL): expired rows removed in the background, a small batch at a time.

Reads already skip expired rows, so the sweep only frees space: it may run late, or on
every worker at once, without a client seeing the difference.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

log = logging.getLogger(__name__)

BATCH = 500  # rows per statement: a writer never holds SQLite's lock for long


class Expiring(Protocol):
    def remove_expired(self, batch: int = BATCH) -> int: ...


def interval(ttl: int) -> float:
    """Seconds between sweeps: a quarter of the retention, between 1 s and 10 minutes."""
    return max(1.0, min(ttl / 4, 600.0))


def start(stores: list[Expiring], ttl: int) -> threading.Event | None:
    """Sweep `stores` every `interval(ttl)` until the returned event is set (nothing when ttl is 0).

    Under gevent's patching the thread is a greenlet, and each batch a short statement.
    """
    if not ttl:
        return None
    stop = threading.Event()
    threading.Thread(
        target=_sweep, args=(stores, interval(ttl), stop), daemon=True, name="store-sweeper"
    ).start()
    return stop


def _sweep(stores: list[Expiring], every: float, stop: threading.Event) -> None:
    failing = False
    while not stop.wait(every):
        try:
            for store in stores:
                while store.remove_expired(BATCH) == BATCH:
                    time.sleep(0)  # let requests run between batches
            failing = False
        except Exception as exc:  # noqa: BLE001 - the database may be away for a while: try again later
            if not failing:
                log.warning("could not remove expired stored data (will retry): %s", exc)
            failing = True
