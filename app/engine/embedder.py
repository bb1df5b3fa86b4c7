"""Embeddings (or a reranker's scores): several inputs per decode, pooled by llama.cpp, vectors normalised."""

from __future__ import annotations

import llama_cpp
import numpy as np
from llama_cpp import _internals as internals

from app.engine import backends, native_log
from app.engine.batch import TokenBatch
from app.engine.gguf import vocabulary_check
from app.engine.model import fingerprint
from app.engine.tokenizer import Tokenizer

POOLING = {
    None: llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED,  # the GGUF's own
    "mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN,
    "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS,
    "last": llama_cpp.LLAMA_POOLING_TYPE_LAST,
    "rank": llama_cpp.LLAMA_POOLING_TYPE_RANK,  # a reranker: one relevance score per input
}
MAX_SEQUENCES = 64  # inputs in one decode


class Embedder:
    """A model loaded for embeddings; `embed` runs in the engine's native thread only."""

    def __init__(
        self, path: str, n_ctx: int, n_threads: int, pooling: str | None, n_gpu_layers: int = 0
    ) -> None:
        vocabulary_check.check(path)  # before llama.cpp, which would abort on some vocabularies
        native_log.install()
        backends.load()
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = n_gpu_layers
        with native_log.recording():  # a failed load says llama.cpp's reason
            self.model = internals.LlamaModel(path_model=path, params=model_params, verbose=False)
        # Past its trained context a BERT-like model has no position embeddings at all.
        n_ctx = min(n_ctx, llama_cpp.llama_model_n_ctx_train(self.model.model))
        params = llama_cpp.llama_context_default_params()
        # Each input is pooled whole, so the longest one must fit one micro-batch; the
        # inputs of one decode share the cells of one pool.
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx
        params.n_seq_max = MAX_SEQUENCES
        params.kv_unified = True
        params.embeddings = True
        params.pooling_type = POOLING[pooling]
        params.n_threads = params.n_threads_batch = n_threads
        params.no_perf = True
        self.context = internals.LlamaContext(model=self.model, params=params, verbose=False)
        self.ctx = self.context.ctx
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_ctx = llama_cpp.llama_n_batch(self.ctx)
        self.pooling = llama_cpp.llama_pooling_type(self.ctx)
        self.ranks = self.pooling == llama_cpp.LLAMA_POOLING_TYPE_RANK
        # A reranker's classifier gives scores (one per label), not a vector.
        model = self.model.model
        self.n_embd = (
            llama_cpp.llama_model_n_cls_out(model) if self.ranks else llama_cpp.llama_model_n_embd_out(model)
        )
        if self.pooling == llama_cpp.LLAMA_POOLING_TYPE_NONE:  # the GGUF names none: average the tokens
            raise ValueError("the model names no pooling type; set one (mean, cls, last) in LLM_MODELS")
        self.tokenizer = Tokenizer(self.model)
        self.fingerprint = fingerprint(path, self.n_ctx, True)
        self._batch = TokenBatch(self.n_ctx)

    def embed(self, inputs: list[list[int]]) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """One unit vector per input (rows of the result), computed several inputs per decode;
        and each decode's sequences and tokens."""
        vectors = np.zeros((len(inputs), self.n_embd), dtype=np.float32)
        decodes = []
        start = 0
        while start < len(inputs):
            self._batch.clear()
            end = start
            while end < len(inputs) and end - start < MAX_SEQUENCES and self._batch.room >= len(inputs[end]):
                tokens = np.asarray(inputs[end], dtype=np.int32)
                self._batch.add_run(tokens, 0, end - start, logits_last=True, logits_all=True)
                end += 1
            llama_cpp.llama_memory_clear(self.memory, True)
            decodes.append((end - start, self._batch.size))
            code = self._batch.decode(self.ctx)
            if code != 0:
                raise RuntimeError(f"llama_decode failed with {code}")
            for row in range(start, end):
                pointer = llama_cpp.llama_get_embeddings_seq(self.ctx, row - start)
                vectors[row] = np.ctypeslib.as_array(pointer, shape=(self.n_embd,))
            start = end
        if self.ranks:
            return vectors, decodes  # scores, as the classifier gave them
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms), decodes

    def close(self) -> None:
        self.context.close()
        self.model.close()
