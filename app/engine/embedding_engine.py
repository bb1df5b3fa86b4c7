"""The engine of an embedding model's worker: concurrent requests share decodes, oldest first."""

from __future__ import annotations

from dataclasses import dataclass, field

import gevent
import gevent.event
import numpy as np

from app.engine.embedder import MAX_SEQUENCES, Embedder
from app.engine.errors import QueueFullError
from app.engine.loading import LoadingEngine
from app.engine.observer import EngineObserver
from app.settings.config import Config


@dataclass
class _Waiting:
    inputs: list[list[int]]
    result: gevent.event.AsyncResult = field(default_factory=gevent.event.AsyncResult)


class EmbeddingEngine(LoadingEngine[Embedder]):
    """Gathers the inputs of every waiting request into the native thread's next run.

    Ten clients sending one text each cost one decode of ten sequences rather than ten
    decodes, as llama.cpp's server does across its slots.
    """

    def __init__(
        self, config: Config, observer: EngineObserver | None = None, exit_on_failure: bool = True
    ) -> None:
        super().__init__(config, observer, exit_on_failure)
        self.parallel = MAX_SEQUENCES
        self.n_ctx = config.n_ctx
        self.dimensions = 0  # once loaded
        self.ranks = False  # once loaded: the model scores query-document pairs
        self._embedder: Embedder | None = None
        self._waiting: list[_Waiting] = []
        self._running: list[_Waiting] = []
        self._drainer: gevent.Greenlet | None = None

    @property
    def admitted(self) -> int:
        return len(self._waiting) + len(self._running)

    @property
    def load(self) -> int:
        return self.admitted

    @property
    def has_room(self) -> bool:
        # Busy: an idle worker holding this model would answer sooner (else requests here merge).
        return self.admitted == 0

    def embed(self, inputs: list[list[int]]) -> np.ndarray:
        """Unit vectors of `inputs` (token ids), one row each; the greenlet waits, the hub does not."""
        if len(self._waiting) >= self.config.max_queue:
            raise QueueFullError(
                f"This worker has {len(self._waiting)} embedding requests waiting (LLM_MAX_QUEUE="
                f"{self.config.max_queue}); retry shortly."
            )
        waiting = _Waiting(inputs)
        self._waiting.append(waiting)
        self._figures()
        if self._drainer is None:
            self._drainer = gevent.spawn(self._drain)
        vectors: np.ndarray = waiting.result.get()
        return vectors

    def _drain(self) -> None:
        """While requests wait: run the oldest ones whose inputs fill one decode, all in one call."""
        embedder = self._embedder
        assert embedder is not None, "requests are embedded only once the model is ready"
        try:
            while self._waiting:
                taken, count = 0, 0
                while taken < len(self._waiting) and (
                    taken == 0 or count + len(self._waiting[taken].inputs) <= MAX_SEQUENCES
                ):
                    count += len(self._waiting[taken].inputs)
                    taken += 1
                self._running, self._waiting = self._waiting[:taken], self._waiting[taken:]
                inputs = [item for waiting in self._running for item in waiting.inputs]
                self._figures()
                try:
                    vectors, decodes = self.pool.spawn(embedder.embed, inputs).get()
                except Exception as exc:  # noqa: BLE001 - each request's view reports it
                    for waiting in self._running:
                        waiting.result.set_exception(exc)
                else:
                    for sequences, tokens in decodes:
                        self.observer.stepped(sequences, tokens, 0, self.config.n_threads, 0)
                    start = 0
                    for waiting in self._running:
                        waiting.result.set(vectors[start : start + len(waiting.inputs)])
                        start += len(waiting.inputs)
                self._running = []
                self._figures()
        finally:
            self._drainer = None

    def _figures(self) -> None:
        self.observer.load_changed(self.admitted, len(self._running), self.admitted)

    def _load(self) -> Embedder:
        cfg = self.config
        self._embedder = Embedder(cfg.model_path, cfg.n_ctx, cfg.n_threads, cfg.pooling, cfg.n_gpu_layers)
        return self._embedder

    def _free_model(self) -> None:
        assert self._embedder is not None, "loaded"
        self._embedder.close()
        self._embedder = None

    def _loaded_with(self, embedder: Embedder) -> str:
        self.dimensions = embedder.n_embd
        self.ranks = embedder.ranks  # a reranker: /v1/rerank, not /v1/embeddings
        self.n_ctx = embedder.n_ctx  # the model's trained context may be shorter than LLM_N_CTX
        if embedder.ranks:
            return f"a reranker ({embedder.n_embd} scores per input)"
        return f"embeddings of {embedder.n_embd} dimensions, pooling type {embedder.pooling}"
