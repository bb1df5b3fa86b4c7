"""The engine's reports turned into metrics, and its load passed on to whoever balances workers."""

from __future__ import annotations

from collections.abc import Callable

from app.engine.observer import EngineObserver
from app.telemetry import metrics


class EngineFigures(EngineObserver):
    """Records the engine's figures as Prometheus metrics; `publish` also hears each load change."""

    def __init__(
        self, publish: Callable[[int], object] | None = None, ready: Callable[[], object] | None = None
    ) -> None:
        self._publish, self._ready = publish, ready

    def loaded(self, seconds: float) -> None:
        metrics.MODEL_LOAD.set(seconds)
        if self._ready is not None:
            self._ready()

    def load_changed(self, admitted: int, running: int, load: int) -> None:
        metrics.IN_FLIGHT.set(running)
        metrics.QUEUE_DEPTH.set(max(0, load - running))
        if self._publish is not None:
            self._publish(load)

    def stepped(self, busy: int, decoded: int, reused: int, threads: int) -> None:
        metrics.SEQUENCES_BUSY.set(busy)
        metrics.THREADS.set(threads)
        if decoded:
            metrics.BATCH_TOKENS.observe(decoded)
        if reused:
            metrics.CACHED_PROMPT_TOKENS.inc(reused)
