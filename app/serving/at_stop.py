"""What a stopping worker does once its connections and background work are done, before it exits.

The app registers it (the KV cache written to the disk tier, for the next server); the
worker (app/serving/worker.py) runs it within what is left of the graceful timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
_hooks: list[Callable[[float], object]] = []


def register(hook: Callable[[float], object]) -> None:
    """Call `hook(seconds left)` when the worker stops."""
    _hooks.append(hook)


def run(deadline: float) -> None:
    """Run every hook in turn, each given the time left until `deadline` (time.monotonic())."""
    for hook in _hooks:
        try:
            hook(max(1.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - a failing hook must not keep the others from running
            log.exception("a stopping worker's last task failed")
