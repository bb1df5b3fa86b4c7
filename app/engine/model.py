"""Load a GGUF model and make the one llama.cpp context a worker's sequences share."""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals as internals

from app.engine import backends, native_log
from app.engine.batch import TokenBatch
from app.engine.cache.kv_memory import KvMemory, bytes_per_cell, ggml_type
from app.engine.context import ContextShape
from app.engine.gguf import vocabulary_check
from app.engine.media import MediaRun
from app.engine.memory import MemoryKind
from app.engine.multimodal.projector import Projector
from app.engine.sampling.sampler import SequenceSampler, logprob_at
from app.engine.tokenizer import Tokenizer
from app.engine.types import ChoicePlan, TokenLogprob

log = logging.getLogger("app.engine.engine")


class LoadedModel:
    """The weights, their vocabulary, and one context whose KV cache holds every sequence.

    Batch-invariant (LLM_BATCH_INVARIANT): llama.cpp's CPU kernels add up in an order that
    depends on the batch and the thread count in four places, three turned off here and one
    patched at build (deploy/llama-cpp/patches), so a token's logits are the same bit for bit
    whoever it is batched with, however its prompt was split into chunks, whether its history
    came from the cache, and on any number of threads (docs/performance/kernels.md): flash
    attention takes other paths for one query and for 64 and splits a lone token's keys between
    the threads (ggml-cpu/ops.cpp); K-quant weights take a tiled kernel from 8 rows on
    (GGML_CPU_TILED_MM); repacked weights take another kernel for one row than for several
    (use_extra_bufts); llamafile's sgemm takes two rows or more of float matrices (the
    attention's) and ggml's vec_dot one, which the patch makes sgemm's too. Quantized weights
    keep sgemm, whose Q8_0/Q5_0/Q4_0 sums are vec_dot's, bit for bit.

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
        loras: tuple[str | None, ...] = (),
        mmproj: str | None = None,
    ) -> None:
        vocabulary_check.check(path)  # before llama.cpp, which would abort on some vocabularies
        native_log.install()  # llama.cpp's own log: warnings, not a line per layer (native_log.py)
        backends.load()
        self.cpu_variant = backends.cpu_variant()
        invariant = shape.batch_invariant
        if invariant:  # read once per process, at the first matrix product (ggml-cpu/tiled/tiled.cpp)
            os.environ["GGML_CPU_TILED_MM"] = "0"
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = n_gpu_layers
        model_params.use_mmap = True  # workers share the weights through the page cache
        model_params.use_extra_bufts = not invariant
        if tensor_split:
            # Kept on self: llama.cpp reads the array while loading.
            self._split = (ctypes.c_float * len(tensor_split))(*tensor_split)
            model_params.tensor_split = self._split
        with native_log.recording() as loading:
            self.model = internals.LlamaModel(path_model=path, params=model_params, verbose=False)
        self.projector: Projector | None = None
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
        # A window's worth of cells for sliding-window layers (llama-server's default, with
        # checkpoints) or every position (LLM_SWA_FULL=1, ours): cells restored into a window come
        # back in other places of the cache, and llama.cpp's attention sums differ with the places.
        params.swa_full = shape.swa_full
        if invariant:
            params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.no_perf = True
        with native_log.recording() as sizing:
            self.context = internals.LlamaContext(model=self.model, params=params, verbose=False)
        self.placement = native_log.placement(loading.lines + sizing.lines)
        self.ctx = self.context.ctx
        self.cells = llama_cpp.llama_get_memory(self.ctx)
        if not self.cells:  # llama.cpp keeps no KV cache for BERT-like (non-causal) models
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
        if mmproj:  # the multimodal projector (LLM_MMPROJ), loaded beside the weights it projects into
            try:
                self.projector = Projector(mmproj, self.model.model, shape.n_threads, invariant)
            except ValueError:
                self.close()
                raise
        self.tokenizer.projector = self.projector
        self.fingerprint = fingerprint(
            path, shape.n_batch, shape.unified, shape.type_k, shape.type_v, shape.batch_invariant
        )
        # Freed with the weights, or one by one (unloaded at run time); None: an empty place.
        self.adapters: list[Any] = [None if lora is None else self._adapter(lora) for lora in loras]
        self._applied: tuple[float, ...] = ()  # the scales the context decodes with now
        self.memory_kind = self._memory_kind(shape.swa_full)
        self.batch_invariant = invariant and invariant_build(llama_cpp.llama_print_system_info())
        if invariant and not self.batch_invariant:
            log.warning(
                "LLM_BATCH_INVARIANT=1, but this llama.cpp was built with llamafile's sgemm and without "
                "deploy/llama-cpp/patches/sgemm-one-row.patch: answers may still depend on batching"
            )

    def _memory_kind(self, swa_full: bool) -> MemoryKind:
        """What the memory keeps: the model's flags, and whether a sequence can be cut back at all,
        tried as llama-server's `common_context_can_seq_rm` tries it (two tokens in, one out)."""
        m = self.model.model
        batch = TokenBatch(2)
        batch.add(0, 0, 0, False)
        batch.add(0, 1, 0, True)
        cuts = batch.decode(self.ctx) == 0 and bool(llama_cpp.llama_memory_seq_rm(self.cells, 0, 1, -1))
        llama_cpp.llama_memory_clear(self.cells, True)
        sliding = max(0, llama_cpp.llama_model_n_swa(m))
        hybrid = bool(llama_cpp.llama_model_is_hybrid(m))
        metadata = self.model.metadata()
        experts = metadata.get(f"{metadata.get('general.architecture', '')}.expert_count", "0")
        return MemoryKind(
            window=0 if swa_full else sliding,
            recurrent=hybrid or bool(llama_cpp.llama_model_is_recurrent(m)) or not cuts,
            hybrid=hybrid,
            swa_full=swa_full and sliding > 0,
            sliding=sliding,
            experts=int(experts) if experts.isdigit() else 0,
            shifts=cuts and not sliding and bool(llama_cpp.llama_memory_can_shift(self.cells)),
        )

    def _adapter(self, path: str) -> Any:
        adapter = llama_cpp.llama_adapter_lora_init(self.model.model, path.encode())
        if not adapter:
            self.close()
            raise ValueError(f"LoRA adapter {path}: llama.cpp could not load it (see its log: base model?)")
        return adapter

    def load_adapter(self, index: int, path: str) -> None:
        """Load the adapter at `path` into place `index` (ValueError naming it if llama.cpp cannot)."""
        adapter = llama_cpp.llama_adapter_lora_init(self.model.model, path.encode())
        if not adapter:
            raise ValueError(f"llama.cpp could not load {path} as a LoRA adapter of this model")
        self.adapters.extend([None] * (index + 1 - len(self.adapters)))
        self.adapters[index] = adapter

    def has_adapter(self, index: int) -> bool:
        """Whether an adapter fills place `index`."""
        return index < len(self.adapters) and self.adapters[index] is not None

    def free_adapter(self, index: int) -> None:
        """Free the adapter at place `index` (the batcher frees only those no sequence decodes with)."""
        if index >= len(self.adapters) or self.adapters[index] is None:
            return
        if any(self._applied[index : index + 1]):  # the context still points at it
            llama_cpp.llama_set_adapters_lora(self.ctx, None, 0, None)
            self._applied = ()
        llama_cpp.llama_adapter_lora_free(self.adapters[index])
        self.adapters[index] = None

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

    def encode_media(self, run: MediaRun) -> np.ndarray | None:
        return self._projector().encode(run)

    def decode_media(self, run: MediaRun, embeddings: np.ndarray, seq_id: int, first: int) -> int:
        return self._projector().decode(self.ctx, run, embeddings, seq_id, first, self.n_batch)

    def _projector(self) -> Projector:
        if self.projector is None:
            raise RuntimeError("a prompt with media reached a model without a projector")
        return self.projector

    def forget(self, seq_id: int, start: int, end: int) -> bool:
        return bool(llama_cpp.llama_memory_seq_rm(self.cells, seq_id, start, end))

    def move(self, seq_id: int, start: int, end: int, delta: int) -> None:
        llama_cpp.llama_memory_seq_add(self.cells, seq_id, start, end, delta)

    def share(self, source: int, target: int, start: int, end: int) -> None:
        llama_cpp.llama_memory_seq_cp(self.cells, source, target, start, end)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.cells, True)

    def pos_min(self, seq_id: int) -> int:
        return int(llama_cpp.llama_memory_seq_pos_min(self.cells, seq_id))

    def save_state(self, seq_id: int, partial: bool = False) -> bytes:
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        size = llama_cpp.llama_state_seq_get_size_ext(self.ctx, seq_id, flags)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data_ext(self.ctx, buffer, size, seq_id, flags)
        return bytes(memoryview(buffer)[:written])

    def load_state(self, seq_id: int, state: bytes, partial: bool = False) -> None:
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data_ext(self.ctx, buffer, len(state), seq_id, flags) != len(state):
            raise RuntimeError(f"llama.cpp could not restore a saved state into sequence {seq_id}")

    def sampler(self, plan: ChoicePlan, end_tokens: list[int]) -> SequenceSampler:
        return SequenceSampler(plan, self.ctx, self.model.vocab, self.n_vocab, end_tokens)

    def logprob(self, row: int, token: int, top: int) -> TokenLogprob:
        return logprob_at(self.ctx, row, self.n_vocab, token, top, self.tokenizer.piece)

    def close(self) -> None:
        """Free the projector and the context, then the weights."""
        if self.projector is not None:
            self.projector.close()
        self.context.close()
        self.model.close()


def invariant_build(system_info: bytes) -> bool:
    """Whether this llama.cpp's matrix products add up alike for one row and many: built without
    llamafile's sgemm, or with it and the patch that sends it one row too (SGEMM_ONE_ROW)."""
    return b"LLAMAFILE = 1" not in system_info or b"SGEMM_ONE_ROW = 1" in system_info


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
