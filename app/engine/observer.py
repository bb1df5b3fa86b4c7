"""What the engine reports while it runs, for whoever listens (telemetry, the peer table)."""

from __future__ import annotations

from app.engine.cache.kv_memory import KvMemory
from app.engine.memory import MemoryKind


class EngineObserver:
    """Hears the engine's figures, always on the hub; this base hears nothing."""

    def loaded(self, seconds: float) -> None:
        """The model has loaded, taking `seconds`."""

    def kv_sized(self, memory: KvMemory) -> None:
        """The context's KV cache is made: its cells, their types and bytes."""

    def memory_known(self, memory: MemoryKind, checkpoints: int, drafts_off: str) -> None:
        """The model's memory, its checkpoints per sequence, and why drafts are off ("": they are not)."""

    def resumed(self, restores: int, full: int) -> None:
        """Prompts resumed from a checkpoint, and prompts evaluated in full though they shared a prefix."""

    def kv_in_use(self, cells: int) -> None:
        """Sequences with a choice now hold `cells` KV cells (told on a change)."""

    def drafted(self, drafted: int, accepted: int) -> None:
        """A step verified `drafted` draft tokens (speculative decoding) and kept `accepted`."""

    def cached_blocks(self, seq_id: int, sequences: int, hashes: list[int]) -> None:
        """Sequence `seq_id` (of `sequences`) now caches the prefix these block hashes stand for."""

    def load_changed(self, admitted: int, running: int, load: int) -> None:
        """`admitted` requests held; `running` choices have a sequence; `load` choices hold or want one."""

    def stepped(self, busy: int, decoded: int, reused: int, threads: int, sampled: int) -> None:
        """A step ran: `busy` sequences, `decoded` tokens in its batch, `reused` prompt tokens from cache,
        `threads` llama.cpp threads for the next one, and `sampled` tokens generated."""
