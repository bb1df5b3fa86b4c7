"""Load a GGUF model and make the one llama.cpp context a worker's sequences share."""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import _internals as internals
from llama_cpp._logger import set_verbose

from app.engine.batch import TokenBatch
from app.engine.context import ContextShape
from app.engine.kv_memory import KvMemory, bytes_per_cell, ggml_type
from app.engine.sampler import SequenceSampler, logprob_at
from app.engine.tokenizer import Tokenizer
from app.engine.types import GenerationRequest, TokenLogprob


class LoadedModel:
    """The weights, their vocabulary, and one context whose KV cache holds every sequence.

    By default each sequence has cells of its own, a whole context's worth, as
    llama-server's slots do: attention then spans only a sequence's own cells, measured
    here about 5% faster at 8 sequences than one pool. When LLM_KV_SIZE is smaller than
    that, the sequences share one unified pool instead (over-committed memory): a
    sequence may then borrow another's cached prefix by metadata alone, and a full pool
    ends a choice with `kv_full`.
    """

    def __init__(
        self,
        path: str,
        shape: ContextShape,
        n_gpu_layers: int = 0,
        tensor_split: Any = None,
        chat_template: str | None = None,
        loras: tuple[str, ...] = (),
    ) -> None:
        set_verbose(False)  # llama.cpp's own log: errors only, not a line per layer
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = n_gpu_layers
        model_params.use_mmap = True  # workers share the weights through the page cache
        if tensor_split:
            # Kept on self: llama.cpp reads the array while loading.
            self._split = (ctypes.c_float * len(tensor_split))(*tensor_split)
            model_params.tensor_split = self._split
        self.model = internals.LlamaModel(path_model=path, params=model_params, verbose=False)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = shape.kv_size
        params.n_batch = shape.n_batch
        params.n_ubatch = shape.n_batch
        params.n_seq_max = shape.parallel
        params.kv_unified = shape.unified
        params.n_threads = shape.n_threads
        params.n_threads_batch = shape.n_threads
        # Quantized values need flash attention; its default (auto) turns it on wherever the
        # backend has it, so an unsupported pair fails here, as llama-server's does.
        params.type_k, params.type_v = ggml_type(shape.type_k), ggml_type(shape.type_v)
        params.no_perf = True
        self.context = internals.LlamaContext(model=self.model, params=params, verbose=False)
        self.ctx = self.context.ctx
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        if not self.memory:  # llama.cpp keeps no KV cache for BERT-like (non-causal) models
            self.close()
            raise ValueError(
                'an embedding model cannot generate: serve it with "embedding": true in LLM_MODELS'
            )
        self.shape = shape
        self.n_vocab = self.model.n_vocab()
        self.n_batch = llama_cpp.llama_n_batch(self.ctx)
        self.kv_cells = llama_cpp.llama_n_ctx(self.ctx)  # padded by llama.cpp
        self.kv_memory = KvMemory(self.kv_cells, shape.type_k, shape.type_v, self._cell_bytes(shape))
        self.tokenizer = Tokenizer(self.model, chat_template)
        self.fingerprint = fingerprint(path, shape.n_batch, shape.unified, shape.type_k, shape.type_v)
        self.adapters = [self._adapter(lora) for lora in loras]  # freed with the weights
        self._applied: tuple[float, ...] = ()  # the scales the context decodes with now

    def _adapter(self, path: str) -> Any:
        adapter = llama_cpp.llama_adapter_lora_init(self.model.model, path.encode())
        if not adapter:
            self.close()
            raise ValueError(f"LoRA adapter {path}: llama.cpp could not load it (see its log: base model?)")
        return adapter

    def set_adapters(self, scales: tuple[float, ...]) -> None:
        """Decode with the adapters at these scales from the next step on (() or all 0: the base model)."""
        if scales == self._applied:
            return
        used = [(adapter, scale) for adapter, scale in zip(self.adapters, scales, strict=False) if scale]
        adapters = (llama_cpp.llama_adapter_lora_p_ctypes * len(used))(*(a for a, _ in used))
        values = (ctypes.c_float * len(used))(*(scale for _, scale in used))
        if llama_cpp.llama_set_adapters_lora(self.ctx, adapters, len(used), values) != 0:
            raise RuntimeError("llama.cpp could not apply the LoRA adapters")
        self._applied = scales

    def _cell_bytes(self, shape: ContextShape) -> int:
        m = self.model.model
        n_layer, n_head = llama_cpp.llama_model_n_layer(m), llama_cpp.llama_model_n_head(m)
        n_head_kv, n_embd = llama_cpp.llama_model_n_head_kv(m), llama_cpp.llama_model_n_embd(m)
        heads = (n_layer, n_head, n_head_kv, n_embd)
        return bytes_per_cell(self.model.metadata(), *heads, shape.type_k, shape.type_v)

    def set_threads(self, n_threads: int) -> None:
        """Change the threads llama.cpp uses from the next decode on."""
        llama_cpp.llama_set_n_threads(self.ctx, n_threads, n_threads)

    # What the batcher asks of the context (app/engine/context.py's BatchContext).

    def decode(self, batch: TokenBatch) -> int:
        """llama_decode on the batch: 0 done, 1 no room in the KV cache, else a failure."""
        return batch.decode(self.ctx)

    def forget(self, seq_id: int, start: int, end: int) -> None:
        llama_cpp.llama_memory_seq_rm(self.memory, seq_id, start, end)

    def share(self, source: int, target: int, start: int, end: int) -> None:
        llama_cpp.llama_memory_seq_cp(self.memory, source, target, start, end)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.memory, True)

    def save_state(self, seq_id: int) -> bytes:
        size = llama_cpp.llama_state_seq_get_size(self.ctx, seq_id)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self.ctx, buffer, size, seq_id)
        return bytes(memoryview(buffer)[:written])

    def load_state(self, seq_id: int, state: bytes) -> None:
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data(self.ctx, buffer, len(state), seq_id) != len(state):
            raise RuntimeError(f"llama.cpp could not restore a saved state into sequence {seq_id}")

    def sampler(self, request: GenerationRequest, end_tokens: list[int]) -> SequenceSampler:
        return SequenceSampler(request, self.ctx, self.model.vocab, self.n_vocab, end_tokens)

    def logprob(self, row: int, token: int, top: int) -> TokenLogprob:
        return logprob_at(self.ctx, row, self.n_vocab, token, top, self.tokenizer.piece)

    def close(self) -> None:
        """Free the context, then the weights."""
        self.context.close()
        self.model.close()


def fingerprint(path: str, *settings: object) -> str:
    """OpenAI's `system_fingerprint`: what decides the output besides the request.

    The llama.cpp build (version and the CPU features it uses), the model file (its
    size and the hash of its first and last 16 MiB: the metadata, and enough of the
    weights to tell two quantisations apart, without reading gigabytes at every start),
    and the settings that change the arithmetic (batch size, KV layout and types).
    """
    digest = hashlib.sha256()
    digest.update(llama_cpp.__version__.encode())
    digest.update(llama_cpp.llama_print_system_info())
    size = Path(path).stat().st_size
    with open(path, "rb") as weights:
        digest.update(weights.read(16 << 20))
        weights.seek(max(0, size - (16 << 20)))
        digest.update(weights.read())
    digest.update(":".join(str(part) for part in (size, *settings)).encode())
    return "fp_" + digest.hexdigest()[:12]
