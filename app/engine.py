"""All llama.cpp work: one model per worker, generating in a native thread, never on the gevent hub."""

from __future__ import annotations

import logging
import os
import random
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event
import gevent.lock
import gevent.queue
from gevent.threadpool import ThreadPool

from app.config import Config
from app.prompts import Tokenizer
from app.textstream import TextAssembler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sampling:
    """Sampling settings; the defaults are llama.cpp server's."""

    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None


@dataclass(frozen=True)
class GenerationRequest:
    """What the engine needs to generate: the prompt's tokens and how to sample."""

    prompt_tokens: list[int]
    max_tokens: int
    sampling: Sampling = field(default_factory=Sampling)
    stop: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Chunk:
    """A piece of generated text; the last chunk of a generation has `finish_reason` set."""

    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int = 0
    error: str | None = None


class Generation:
    """One request's generation: iterate it for chunks, cancel it to stop.

    Iterating yields `None` whenever `idle` seconds pass with nothing to send, so a
    stream can write a keep-alive while it waits for the model.
    """

    def __init__(self, engine: Engine, request: GenerationRequest, idle: float | None) -> None:
        self.request = request
        self.cancelled = False
        self._engine = engine
        self._idle = idle or None
        self._queue: gevent.queue.Queue[Chunk] = gevent.queue.Queue()
        self._hub = gevent.get_hub()

    def __iter__(self) -> Iterator[Chunk | None]:
        finished = False
        try:
            while not self._engine.slot.acquire(timeout=self._idle):
                yield None
            running = self._engine.pool.spawn(self._engine.run, self)
            # The slot is freed only when the native thread is done with the model,
            # even if this greenlet has gone by then.
            running.rawlink(lambda _: self._engine.slot.release())
            while not finished:
                try:
                    chunk = self._queue.get(timeout=self._idle)
                except gevent.queue.Empty:
                    yield None
                    continue
                finished = chunk.finish_reason is not None
                yield chunk
        finally:
            # Closed early (the client went away): stop the model at the next token.
            if not finished:
                self.cancel()

    def cancel(self) -> None:
        """Stop generating at the next token (or abort prompt processing)."""
        self.cancelled = True

    def emit(self, chunk: Chunk) -> None:
        """Hand a chunk from the native thread to the request's greenlet (thread-safe)."""
        self._hub.loop.run_callback_threadsafe(self._queue.put, chunk)


class Engine:
    """One llama.cpp model, its tokenizer, and the single slot that serialises generations."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.created = int(time.time())
        self.pool = ThreadPool(1)
        self.slot = gevent.lock.Semaphore(1)
        self.tokenizer: Tokenizer | None = None
        self.load_seconds: float | None = None
        self.load_error: str | None = None
        self._loaded = gevent.event.Event()
        self._llama: Any = None
        self._current: Generation | None = None
        self._abort_callback: Any = None

    @property
    def ready(self) -> bool:
        """True once the model is loaded and can generate."""
        return self._loaded.is_set() and self.load_error is None

    def start(self) -> None:
        """Load the model in the native thread, so the worker answers /health meanwhile."""
        result = self.pool.spawn(self._load)
        result.rawlink(self._on_loaded)

    def wait_ready(self, timeout: float) -> bool:
        """Wait (cooperatively) for the model; False if it is not ready in time."""
        self._loaded.wait(timeout)
        return self.ready

    def submit(self, request: GenerationRequest) -> Generation:
        """Queue a generation; it starts when iterated and the model is free."""
        return Generation(self, request, self.config.sse_keepalive)

    def _load(self) -> tuple[Any, Tokenizer, float] | str:
        """Runs in the native thread; returns the loaded model or why it failed."""
        import llama_cpp

        started = time.monotonic()
        cfg = self.config
        try:
            llama = llama_cpp.Llama(
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
        # Prompt processing can only be interrupted from inside llama_decode.
        self._abort_callback = llama_cpp.ggml_abort_callback(self._should_abort)
        llama_cpp.llama_set_abort_callback(llama.ctx, self._abort_callback, None)
        return llama, Tokenizer(llama), time.monotonic() - started

    def _on_loaded(self, result: Any) -> None:
        if not isinstance(result.value, str):
            self._llama, self.tokenizer, self.load_seconds = result.value
            log.info("model %s loaded in %.2fs", self.config.model_id, self.load_seconds)
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

    def _should_abort(self, _data: Any) -> bool:
        current = self._current
        return current is not None and current.cancelled

    def run(self, generation: Generation) -> None:
        """Generate in the native thread. Touches no gevent object but through `emit`."""
        if generation.cancelled:  # the client left while queued: never reach the model
            generation.emit(Chunk(finish_reason="cancelled"))
            return
        self._current = generation
        request = generation.request
        count, reason = 0, "length"
        assembler = TextAssembler(request.stop)
        try:
            llama = self._llama
            if not self.config.prompt_cache:
                # Reusing a cached prefix evaluates the prompt in other batch shapes,
                # which can flip a near-tie: a cold start keeps seeded output identical.
                llama.reset()
            tokens = self._tokens(llama, request)
            for token in tokens:
                if generation.cancelled:
                    reason = "cancelled"
                    break
                if self.tokenizer.is_end_of_generation(token):
                    reason = "stop"
                    break
                count += 1
                text = assembler.feed(self.tokenizer.piece(token))
                if text:
                    generation.emit(Chunk(text))
                if assembler.stopped:
                    reason = "stop"
                    break
                if count >= request.max_tokens:
                    break
            tokens.close()
        except Exception:  # noqa: BLE001 - reported to the greenlet, which logs it
            if not generation.cancelled:  # an aborted llama_decode raises; that is no error
                generation.emit(
                    Chunk(finish_reason="error", completion_tokens=count, error=traceback.format_exc())
                )
                return
            reason = "cancelled"
        finally:
            self._current = None
        generation.emit(Chunk(assembler.finish(), reason, count))

    @staticmethod
    def _tokens(llama: Any, request: GenerationRequest) -> Any:
        sampling = request.sampling
        seed = sampling.seed if sampling.seed is not None else random.getrandbits(32)
        llama.set_seed(seed & 0xFFFFFFFF)
        return llama.generate(
            request.prompt_tokens,
            temp=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            min_p=sampling.min_p,
            repeat_penalty=sampling.repeat_penalty,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
        )
