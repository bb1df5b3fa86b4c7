"""A start-up worker's model asleep while idle: weights and KV freed, loaded again by the next request.

llama-server's `--sleep-idle-seconds` (LLM_SLEEP_IDLE here) and vLLM's `/sleep` and
`/wake_up`: an idle worker gives its memory back without leaving the server, and stays
ready as far as health checks and routing go (a sleeping pod is healthy, and the next
request wakes its model where it lands). Sleeping closes the engine, as a pool worker's
unload does; waking installs a new engine for the same entry and starts its load, so a
view waiting for the engine (app/api/http/body.py) simply waits for the load.
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
from app.serving.model_holder import EngineMaker, NoModel, idle_clock
from app.settings.config import Config

log = logging.getLogger(__name__)

# Told (model id, reason) when the model falls asleep, (model id, seconds) when it has woken.
Slept = Callable[[str, str], None]
Woke = Callable[[str, float], None]


class Sleeper:
    """This start-up worker's model: put to sleep (idle past `idle_seconds`, or told), and woken."""

    def __init__(
        self,
        app: Flask,
        config: Config,
        make_engine: EngineMaker,
        worker: peers.Worker,
        reports: tuple[Slept, Woke] | None = None,
    ) -> None:
        self.app, self.config, self.make_engine, self.worker = app, config, make_engine, worker
        self._slept, self._woke = reports or (lambda model, reason: None, lambda model, seconds: None)
        self.in_flight = 0  # views routed here that have not handed the engine their work yet
        self.waking = False  # from a wake until its load has ended
        # Answers that need the model but not its weights (/props): made by `answer_makers` just before
        # it falls asleep and given while it sleeps, so that polling them does not wake it
        # (llama-server keeps them so).
        self.answer_makers: dict[str, Callable[[], Any]] = {}
        self.answers: dict[str, Any] = {}
        self._lock = gevent.lock.Semaphore()  # one sleep or wake at a time
        worker.touch()
        # Sleep once idle for LLM_SLEEP_IDLE seconds; keep the idle clock at zero while serving.
        self._clock = idle_clock(self._tick, "the sleep clock") if config.sleep_idle is not None else None

    @property
    def engine(self) -> LoadingEngine[Any]:
        engine: LoadingEngine[Any] = self.app.extensions["engine"]
        return engine

    @property
    def asleep(self) -> bool:
        return self.worker.asleep

    @property
    def serving(self) -> bool:
        return bool(self.engine.load or self.in_flight)

    def sleep(self, reason: str) -> bool:
        """Free the model's weights and KV unless it serves requests (False then); True if asleep."""
        with self._lock:
            if self.worker.asleep:
                return True
            if self.serving or not self.engine.ready:
                return False
            engine, started = self.engine, time.monotonic()
            with self.app.app_context():
                self.answers = {name: make() for name, make in self.answer_makers.items()}
            # In its place: an engine never ready, so nothing reaches the closed one.
            self.app.extensions["engine"] = NoModel(self.config)
            self.worker.asleep = True
            self.worker.publish(0)
            engine.close()  # frees the context and the weights in the native thread, trims the heap
            self._slept(self.config.model_id, reason)
            took = time.monotonic() - started
            log.info("model %s asleep (%s) in %.2fs", self.config.model_id, reason, took)
            return True

    def wake(self) -> None:
        """Start loading the model again if it sleeps; the views routed here wait for the load."""
        with self._lock:
            if not self.worker.asleep:
                return
            engine = self.make_engine(self.config)
            self.app.extensions["engine"] = engine
            engine.start()
            self.waking, self.worker.asleep = True, False
            self.worker.touch()
            self.worker.publish(0)
            gevent.spawn(self._report_wake, engine)

    def _report_wake(self, engine: LoadingEngine[Any]) -> None:
        woke = engine.wait_ready(self.config.timeout)
        self.waking = False
        if woke:
            self._woke(self.config.model_id, engine.load_seconds or 0.0)
            log.info("model %s awake in %.2fs", self.config.model_id, engine.load_seconds or 0.0)

    def _tick(self) -> None:
        if self.worker.asleep:
            return
        if self.serving:
            self.worker.touch()
            return
        idle = time.monotonic() - self.worker.used / 1000
        if self.config.sleep_idle is not None and idle >= self.config.sleep_idle and not self._lock.locked():
            self.sleep("idle")
