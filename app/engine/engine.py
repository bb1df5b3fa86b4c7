"""All llama.cpp work: one model per worker, generating in a native thread, never on the gevent hub."""

from __future__ import annotations

import ctypes
import logging
import os
import time
import traceback
from typing import Any

import gevent.event
import gevent.lock
from gevent.threadpool import ThreadPool

from app.config import Config
from app.engine.errors import QueueFullError
from app.engine.generation import Generation
from app.engine.observer import EngineObserver
from app.engine.sampling import ServerLlama
from app.engine.token_loop import decode
from app.engine.tokenizer import Tokenizer
from app.engine.types import Chunk, GenerationRequest

log = logging.getLogger(__name__)


class Engine:
    """One llama.cpp model, its tokenizer, and the single slot that serialises generations."""

    def __init__(self, config: Config, observer: EngineObserver | None = None) -> None:
        self.config = config
        self.observer = observer or EngineObserver()
        self.created = int(time.time())
        self.pool = ThreadPool(1)
        self.slot = gevent.lock.Semaphore(1)
        self.admitted = 0  # the running generation plus those queued for the slot
        self.tokenizer: Tokenizer | None = None
        self.load_seconds: float | None = None
        self.load_error: str | None = None
        self._loaded = gevent.event.Event()
        self._llama: Any = None
        self._current: Generation | None = None
        self._abort_callback: Any = None
        self._abort_flag = ctypes.create_string_buffer(2)  # [flag, NUL]: strlen is 1 when set

    @property
    def ready(self) -> bool:
        """True once the model is loaded and can generate."""
        return self._loaded.is_set() and self.load_error is None

    def load(self) -> None:
        """Load the model in the native thread, so the worker answers /health meanwhile."""
        result = self.pool.spawn(self._load)
        result.rawlink(self._on_loaded)

    def wait_ready(self, timeout: float) -> bool:
        """Wait (cooperatively) for the model; False if it is not ready in time."""
        self._loaded.wait(timeout)
        return self.ready

    def submit(self, requests: list[GenerationRequest]) -> Generation:
        """Admit a generation (or refuse at once); it starts when iterated and the model is free."""
        if self.admitted >= 1 + self.config.max_queue:
            raise QueueFullError(
                f"This worker is busy with {self.admitted} requests (LLM_MAX_QUEUE="
                f"{self.config.max_queue}); retry shortly."
            )
        self.count_admitted(+1)
        return Generation(self, requests)

    def count_admitted(self, change: int) -> None:
        """Track the requests this worker holds, and tell the other workers."""
        self.admitted += change
        self._load_changed()

    def _load_changed(self) -> None:
        self.observer.load_changed(self.admitted, 1 if self.slot.locked() else 0)

    def run_in_thread(self, generation: Generation) -> None:
        """Run a generation that holds the slot in the native thread; free the slot after."""
        running = self.pool.spawn(self.run, generation)
        self._load_changed()
        # The slot is freed only when the native thread is done with the model,
        # even if the request's greenlet has gone by then.
        running.rawlink(lambda result: self._on_run_done(generation, result))

    def _on_run_done(self, generation: Generation, result: Any) -> None:
        self.slot.release()
        self._load_changed()
        reason, count = result.value if result.successful() else ("error", 0)
        if reason == "cancelled":
            stage = f"after {count} tokens" if count else "during prompt processing"
            log.info("request cancelled by its client %s; the model is free", stage)

    def _load(self) -> tuple[Any, Tokenizer, float] | str:
        """Runs in the native thread; returns the loaded model or why it failed."""
        import llama_cpp

        started = time.monotonic()
        cfg = self.config
        try:
            llama = ServerLlama(
                model_path=cfg.model_path,
                n_ctx=cfg.n_ctx,
                n_batch=cfg.n_batch,
                n_threads=cfg.n_threads,
                n_gpu_layers=cfg.n_gpu_layers,
                tensor_split=cfg.tensor_split,
                use_mmap=True,
                verbose=False,
            )
        except Exception as exc:  # noqa: BLE001 - llama-cpp-python raises bare ValueErrors
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # Prompt processing can only be interrupted from inside llama_decode, which
        # asks the abort callback hundreds of times per token from its compute thread.
        # A Python callback would take the GIL each time, fighting the hub for it under
        # load; libc's strlen on a two-byte buffer is a GIL-free "is the flag set?".
        strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
        self._abort_callback = llama_cpp.ggml_abort_callback(strlen)
        llama_cpp.llama_set_abort_callback(
            llama.ctx, self._abort_callback, ctypes.addressof(self._abort_flag)
        )
        return llama, Tokenizer(llama), time.monotonic() - started

    def _on_loaded(self, result: Any) -> None:
        if not isinstance(result.value, str):
            self._llama, self.tokenizer, self.load_seconds = result.value
            log.info("model %s loaded in %.2fs", self.config.model_id, self.load_seconds)
            self.observer.loaded(self.load_seconds)
            self._loaded.set()
            return
        self.load_error = result.value
        log.critical(
            "LLM_MODEL_PATH=%s: llama.cpp could not load it: %s", self.config.model_path, result.value
        )
        self._loaded.set()
        # gunicorn's arbiter halts the whole server when a worker exits with 3
        # (WORKER_BOOT_ERROR), rather than restarting workers that can never load.
        logging.shutdown()
        os._exit(3)

    def abort_if_running(self, generation: Generation) -> None:
        """Make llama.cpp abort its current decode if it is working for `generation`."""
        if self._current is generation:
            self._abort_flag[0] = b"\x01"

    def run(self, generation: Generation) -> tuple[str, int]:
        """Generate every choice of a request in the native thread, one after another."""
        self._current = generation
        self._abort_flag[0] = b"\x00"
        if generation.cancelled:  # cancelled between admission and here (see abort_if_running)
            self._abort_flag[0] = b"\x01"
        limit = self.config.max_generation_seconds
        deadline = time.monotonic() + limit if limit else float("inf")
        reason, total = "length", 0
        try:
            for request in generation.requests:
                if not self.config.prompt_cache:
                    # Reusing a cached prefix evaluates the prompt in other batch shapes,
                    # which can flip a near-tie: a cold start keeps seeded output identical.
                    self._llama.reset()
                reason, count = decode(self._llama, self.tokenizer, request, generation, deadline)
                total += count
                if reason == "cancelled":
                    break
        except Exception:  # noqa: BLE001 - reported to the greenlet, which logs it
            if not generation.cancelled:  # an aborted llama_decode raises; that is no error
                generation.emit(Chunk(finish_reason="error", error=traceback.format_exc()))
                return "error", total
            generation.emit(Chunk(finish_reason="cancelled"))
            reason = "cancelled"
        finally:
            self._current = None
        return reason, total
