"""A pool worker's model, loaded when asked for and unloaded when idle: engine and settings swap together.

Each gunicorn worker holds one llama.cpp model at a time, as before; a worker of the
on-demand pool (LLM_ON_DEMAND_WORKERS) changes which, inside its process, so that it
keeps its connections and its peer socket and a load costs only the model's own load
time. An unload frees the context and the weights in the worker's native thread and
trims the heap, so the memory goes back to the system (measured from /proc by the tests).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.lock
from flask import Flask

from app.engine.loading import LoadingEngine
from app.serving import peers
from app.settings.config import Config
from app.settings.current import install
from app.settings.models import POOL

log = logging.getLogger(__name__)

TICK = 0.5  # seconds between looks at the idle clock
SETTLE = 1.0  # seconds a model must have been idle before it may be evicted (requests in flight)


class Busy(Exception):  # noqa: N818 - an answer, not a failure
    """The worker's model serves requests: it cannot be swapped now."""


class LoadFailed(Exception):  # noqa: N818
    """llama.cpp could not load the model (the reason is the message)."""


class NoModel(LoadingEngine[Any]):
    """What a pool worker holding no model has in place of an engine: never ready, never busy."""

    admitted = 0
    load = 0

    @property
    def has_room(self) -> bool:
        return False

    def start(self) -> None:
        """Nothing to load."""

    def wait_ready(self, timeout: float) -> bool:
        return False

    def close(self) -> None:
        self.pool.kill()


def idle_clock(tick: Callable[[], None], name: str) -> gevent.Greenlet[[], None]:
    """A greenlet calling `tick` every TICK seconds for the worker's life, whatever one call raises."""

    def run() -> None:
        while True:
            gevent.sleep(TICK)
            try:
                tick()
            except Exception:  # noqa: BLE001 - the clock must outlive one failed unload or sleep
                log.exception("%s failed; it goes on", name)

    return gevent.spawn(run)


EngineMaker = Callable[[Config], LoadingEngine[Any]]
# Told (model id, seconds) after a load; (model id, reason) after an unload: for the metrics.
Loaded = Callable[[str, float], None]
Unloaded = Callable[[str, str], None]


class ModelHolder:
    """This pool worker's model: load one (after unloading the one held), unload it, and its idle clock."""

    def __init__(
        self,
        app: Flask,
        base: Config,
        make_engine: EngineMaker,
        worker: peers.Worker,
        reports: tuple[Loaded, Unloaded] | None = None,
    ) -> None:
        self.app, self.base, self.make_engine, self.worker = app, base, make_engine, worker
        self._loaded, self._unloaded = reports or (lambda model, seconds: None, lambda model, reason: None)
        self.index = POOL
        # Requests this worker has decided to serve with its model and whose views still run (they
        # hold the engine, and may not have handed it their choices yet): the model stays meanwhile.
        self.in_flight = 0
        # How long to keep the model once idle, as the last request said (Ollama's keep_alive):
        # seconds, negative for good; None: its entry's ttl.
        self.keep_alive: float | None = None
        self._lock = gevent.lock.Semaphore()  # one load or unload at a time
        worker.capacity, worker.ready = 0, False
        worker.publish(0)  # live, holding none: peers may have it load a model
        # Unload the model once idle past its entry's ttl; keep the idle clock at zero while it serves.
        self._clock = idle_clock(self._tick, "the on-demand idle clock")

    @property
    def engine(self) -> LoadingEngine[Any]:
        engine: LoadingEngine[Any] = self.app.extensions["engine"]
        return engine

    @property
    def serving(self) -> bool:
        """Whether the model has requests: generating, waiting, or in a view on their way."""
        return bool(self.engine.load or self.in_flight)

    def idle_for(self) -> float:
        """Seconds since the model last served (0 while it serves)."""
        return time.monotonic() - self.worker.used / 1000

    def load(self, index: int, timeout: float) -> None:
        """Hold model `index`, ready, unloading the one held if it is idle (else Busy)."""
        with self._lock:
            loading = self.index != index
            if loading:
                if self.index != POOL and (self.serving or self.idle_for() < SETTLE):
                    raise Busy(f"this worker serves {self.base.models[self.index].id}")
                if self.index != POOL:
                    self._unload("evicted")
                self._install(index, self.make_engine(self.base.for_model(index)))
                self.keep_alive = None
                self.engine.start()
            self.worker.touch()
            if not self.engine.wait_ready(timeout) and self.index == index:
                reason = self.engine.load_error or f"it did not load within {timeout:g} s"
                self._unload("failed")
                raise LoadFailed(reason)
            if loading:
                self._loaded(self.base.models[index].id, self.engine.load_seconds or 0.0)

    def unload(self, reason: str = "request") -> bool:
        """Unload the model held if it is idle; False if it serves requests (or none is held)."""
        with self._lock:
            if self.index == POOL or self.serving:
                return False
            self._unload(reason)
            return True

    def _unload(self, reason: str) -> None:
        engine, spec = self.engine, self.base.models[self.index]
        idle = self.idle_for()
        self._install(POOL, NoModel(self.base.for_model(POOL)))
        started = time.monotonic()
        engine.close()
        self._unloaded(spec.id, reason)
        log.info(
            "model %s unloaded (%s, idle %.1fs) in %.2fs", spec.id, reason, idle, time.monotonic() - started
        )

    def _install(self, index: int, engine: LoadingEngine[Any]) -> None:
        config = self.base.for_model(index)
        install(self.app, config)
        self.app.extensions["engine"] = engine
        self.index = index
        self.worker.model, self.worker.ready = index, False
        self.worker.capacity = 0 if index == POOL else 1 if config.embedding else config.parallel
        self.worker.publish(0)

    def _tick(self) -> None:
        if self.index == POOL:
            return
        if self.serving:
            self.worker.touch()
            self.worker.publish(self.engine.load)
            return
        ttl = self.base.models[self.index].ttl if self.keep_alive is None else self.keep_alive
        if ttl is not None and 0 <= ttl <= self.idle_for() and not self._lock.locked():
            self.unload("ttl")
