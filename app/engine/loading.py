"""What every engine shares: its model loads in the native thread while the worker already answers."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Generic, Protocol, TypeVar

import gevent
import gevent.event
from gevent.threadpool import ThreadPool

from app.engine.observer import EngineObserver
from app.engine.tokenizer import Tokenizer
from app.settings.config import Config

log = logging.getLogger("app.engine.engine")


class Loaded(Protocol):
    """What an engine loads: a model with its tokenizer and fingerprint."""

    tokenizer: Tokenizer
    fingerprint: str


LoadedT = TypeVar("LoadedT", bound=Loaded)


class LoadingEngine(Generic[LoadedT]):
    """Loads a model in a native thread of its own; `ready` once done. Subclasses say what to load."""

    def __init__(self, config: Config, observer: EngineObserver | None = None) -> None:
        self.config = config
        self.observer = observer or EngineObserver()
        self.created = int(time.time())
        self.pool = ThreadPool(1)
        self._tokenizer: Tokenizer | None = None
        self.fingerprint = ""  # OpenAI's system_fingerprint, once loaded
        self.load_seconds: float | None = None
        self.load_error: str | None = None
        self._loaded = gevent.event.Event()
        self._hub = gevent.get_hub()

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (asked only once `ready`)."""
        if self._tokenizer is None:
            raise RuntimeError("the model is not loaded yet")
        return self._tokenizer

    @property
    def has_room(self) -> bool:
        """A new request would start at once."""
        raise NotImplementedError

    @property
    def ready(self) -> bool:
        """True once the model is loaded and can serve."""
        return self._loaded.is_set() and self.load_error is None

    def start(self) -> None:
        """Load the model in the native thread, so the worker answers /health meanwhile."""
        self.pool.spawn(self._timed_load).rawlink(self._on_loaded)

    def wait_ready(self, timeout: float) -> bool:
        """Wait (cooperatively) for the model; False if it is not ready in time."""
        self._loaded.wait(timeout)
        return self.ready

    def _load(self) -> LoadedT:
        """Runs in the native thread: load and return what the engine serves with."""
        raise NotImplementedError

    def _loaded_with(self, loaded: LoadedT) -> str:
        """On the hub, once loaded: start serving; returns what to say about it in the log."""
        raise NotImplementedError

    def _timed_load(self) -> tuple[LoadedT, float] | str:
        started = time.monotonic()
        try:
            loaded = self._load()
        except Exception as exc:  # noqa: BLE001 - llama-cpp-python raises bare ValueErrors
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return loaded, time.monotonic() - started

    def _on_loaded(self, result: Any) -> None:
        if isinstance(result.value, tuple):
            loaded, self.load_seconds = result.value
            self._tokenizer, self.fingerprint = loaded.tokenizer, loaded.fingerprint
            details = self._loaded_with(loaded)
            log.info("model %s loaded in %.2fs: %s", self.config.model_id, self.load_seconds, details)
            self.observer.loaded(self.load_seconds)
            self._loaded.set()
            return
        self.load_error = str(result.value) if result.value is not None else repr(result.exception)
        cfg = self.config
        setting = f"LLM_MODELS ({cfg.model_id!r})" if cfg.models_given else "LLM_MODEL_PATH"
        log.critical("%s=%s: llama.cpp could not load it: %s", setting, cfg.model_path, self.load_error)
        self._loaded.set()
        # gunicorn's arbiter halts the whole server when a worker exits with 3
        # (WORKER_BOOT_ERROR), rather than restarting workers that can never load.
        logging.shutdown()
        os._exit(3)
