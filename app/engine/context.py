"""What the batcher needs of a loaded model, as protocols: LoadedModel is the real one, tests have a fake.

The batcher decides; the model does the llama.cpp calls. Keeping the line here lets the
batcher's step be tested without weights, and keeps every llama.cpp call in model.py,
batch.py and sampler.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.engine.batch import TokenBatch
from app.engine.media import MediaRun
from app.engine.memory import MemoryKind
from app.engine.types import ChoicePlan, TokenLogprob


@dataclass(frozen=True)
class ContextShape:
    """How big the context is and how it is shared; every figure is the engine's, not HTTP's."""

    parallel: int  # sequences generating at once
    n_ctx: int  # most tokens one request may use (prompt + completion)
    kv_size: int  # KV cells the sequences share (parallel * n_ctx gives each its whole context)
    n_batch: int  # most tokens one llama_decode may take
    n_threads: int
    type_k: str = "f16"  # the ggml type KV cells store keys in (LLM_CACHE_TYPE_K)
    type_v: str = "f16"
    swa_full: bool = False  # sliding-window layers keep every position (LLM_SWA_FULL)
    # Kernels whose sums do not depend on the batch or the threads (LLM_BATCH_INVARIANT): see model.py.
    batch_invariant: bool = False

    @property
    def unified(self) -> bool:
        """One pool of cells for all sequences, needed when it is smaller than a context each."""
        return self.kv_size < self.parallel * self.n_ctx


class Pieces(Protocol):
    """The vocabulary as generation reads it, a token at a time."""

    @property
    def adds_bos(self) -> bool:
        """The model's prompts begin with BOS (llama_vocab_get_add_bos)."""

    def is_end_of_generation(self, token: int) -> bool: ...

    def piece(self, token: int) -> bytes: ...


class Sampler(Protocol):
    """One sequence's sampler, drawing from its row of the last decode's logits."""

    def sample(self, row: int) -> int: ...

    def accept(self, token: int) -> None:
        """Record a token chosen for the sequence rather than drawn (penalties, grammar)."""

    def allow_end(self) -> None: ...

    def close(self) -> None: ...


class BatchContext(Protocol):
    """A context whose KV cache holds every sequence: decode a batch, move cells, sample, read logits."""

    @property
    def shape(self) -> ContextShape: ...

    @property
    def n_batch(self) -> int: ...

    @property
    def n_vocab(self) -> int: ...

    @property
    def tokenizer(self) -> Pieces: ...

    @property
    def memory_kind(self) -> MemoryKind: ...

    @property
    def fingerprint(self) -> str:
        """What decides the cells' values besides the tokens (model file, llama.cpp build, KV layout)."""

    def decode(self, batch: TokenBatch) -> int:
        """llama_decode's code: 0 done, 1 no room in the KV cache, else a failure."""

    def encode_media(self, run: MediaRun) -> np.ndarray | None:
        """An image's or audio clip's embeddings (None: it could not be encoded); called from the media
        encoder's thread, while the batcher decodes."""

    def decode_media(self, run: MediaRun, embeddings: np.ndarray, seq_id: int, first: int) -> int:
        """Decode a run's embeddings into the sequence from position `first`: llama_decode's code (0
        done, 1 no room in the KV cache)."""

    def move(self, seq_id: int, start: int, end: int, delta: int) -> None:
        """Move the sequence's cells for positions start..end (-1: to the end) by `delta` positions
        (keys rotated to their new places): llama-server's context shift."""

    def forget(self, seq_id: int, start: int, end: int) -> bool:
        """Drop the sequence's cells for positions start..end (-1: to the end); False if the memory
        cannot (a recurrent state cut short), and then nothing changed."""

    def share(self, source: int, target: int, start: int, end: int) -> None:
        """Give `target` the cells `source` holds for positions start..end (-1, -1: all of them)."""

    def clear(self) -> None:
        """Drop every sequence's cells."""

    def pos_min(self, seq_id: int) -> int:
        """The oldest position the sequence's memory still holds (-1: none)."""

    def save_state(self, seq_id: int, partial: bool = False) -> bytes:
        """The sequence's cells as llama.cpp saves them (to restore later, maybe into another
        sequence); `partial`: only what cannot be cut back (sliding-window cells, recurrent state)."""

    def load_state(self, seq_id: int, state: bytes, partial: bool = False) -> None:
        """Put a state saved by `save_state` into sequence `seq_id` (empty, unless `partial`)."""

    def sampler(self, plan: ChoicePlan, end_tokens: list[int]) -> Sampler:
        """A sampler for the choice `plan` plans (ending tokens banned while `min_tokens` asks)."""

    def logprob(self, row: int, token: int, top: int) -> TokenLogprob:
        """`token`'s log-probability in row `row` of the last decode, and the `top` likeliest."""

    def set_threads(self, n_threads: int) -> None:
        """Decode with this many threads from the next step on."""

    def set_adapters(self, scales: tuple[float, ...]) -> None:
        """Decode with the LoRA adapters at these scales from the next step on (): none."""

    def has_adapter(self, index: int) -> bool:
        """Whether an adapter fills place `index` of the model's list."""

    def load_adapter(self, index: int, path: str) -> None:
        """Load the adapter at `path` into place `index` (ValueError if llama.cpp cannot)."""

    def free_adapter(self, index: int) -> None:
        """Free the adapter at place `index`, if one fills it."""

    def close(self) -> None:
        """Free the context, then the weights."""
