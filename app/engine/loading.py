"""What every engine shares: its model loads in the native thread while the worker already answers."""

from __future__ import annotations

import ctypes
import logging
import os
import time
from typing import Any, Generic, Protocol, TypeVar

import gevent
import gevent.event
from gevent.threadpool import ThreadPool

from app.engine import off_hub
from app.engine.errors import without_paths
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

    def __init__(
        self, config: Config, observer: EngineObserver | None = None, exit_on_failure: bool = True
    ) -> None:
        self.config = config
        # A model loaded at start-up that cannot load stops the server; one loaded on demand does not.
        self.exit_on_failure = exit_on_failure
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
    def load(self) -> int:
        """Requests (or choices) held: generating or waiting."""
        raise NotImplementedError

    @property
    def ready(self) -> bool:
        """True once the model is loaded and can serve."""
        return self._loaded.is_set() and self.load_error is None

    def start(self) -> None:
        """Load the model in the native thread, so the worker answers /health meanwhile."""
        off_hub.start()  # the views' tokenizing threads, there before the first request
        self.pool.spawn(self._timed_load).rawlink(self._on_loaded)

    def wait_ready(self, timeout: float) -> bool:
        """Wait (cooperatively) for the model; False if it is not ready in time."""
        self._loaded.wait(timeout)
        return self.ready

    def _load(self) -> LoadedT:
        """Runs in the native thread: load and return what the engine serves with."""
        raise NotImplementedError

    def close(self) -> None:
        """Free the model and its context, and give the memory back to the system (the engine must be
        idle, and is of no more use). Waits, cooperatively, for the native thread to do it."""
        self._loaded.wait()
        self._stop()
        self.pool.spawn(self._free_native).get()
        self.pool.kill()

    def _stop(self) -> None:
        """On the hub, before the model is freed: stop whatever runs in the native thread."""

    def _free_model(self) -> None:
        """Runs in the native thread: free the model (when it has loaded)."""
        raise NotImplementedError

    def _free_native(self) -> None:
        if self.ready:
            self._free_model()
        # glibc keeps freed heap memory for the process; llama.cpp's buffers are large, so the
        # next load would reuse it, but an unloaded model's memory should show as returned.
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc: its allocator keeps what it keeps
            pass

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
        error = str(result.value) if result.value is not None else repr(result.exception)
        cfg = self.config
        # The log says it whole; a client, who may read it (a 503, a stream's error), not where files are.
        self.load_error = error if cfg.show_paths else without_paths(error)
        setting = f"LLM_MODELS ({cfg.model_id!r})" if cfg.models_given else "LLM_MODEL_PATH"
        log.critical("%s=%s: llama.cpp could not load it: %s%s", setting, cfg.model_path, error,
                     offload_hint(error, cfg.n_gpu_layers))  # fmt: skip
        self._loaded.set()
        if not self.exit_on_failure:
            return
        # gunicorn's arbiter halts the whole server when a worker exits with 3
        # (WORKER_BOOT_ERROR), rather than restarting workers that can never load.
        logging.shutdown()
        os._exit(3)


def offload_hint(error: str, n_gpu_layers: int) -> str:
    """What to change when a load with layers offloaded failed to allocate a buffer: the device could
    not hold them (each worker loads its own copy)."""
    if n_gpu_layers <= 0 or "alloc" not in error.lower():
        return ""
    return (
        f" (LLM_N_GPU_LAYERS={n_gpu_layers}: the device could not hold what was offloaded; offload "
        "fewer layers, shorten LLM_N_CTX or LLM_PARALLEL, or run fewer workers on the device)"
    )
