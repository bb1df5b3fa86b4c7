"""What the batcher is told (its settings) and what each of its steps reports (for telemetry)."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.types import DraftLimits


@dataclass(frozen=True)
class StepReport:
    """What one step did, for telemetry."""

    busy: int  # sequences holding a choice after the step
    decoded: int  # tokens in the step's batch
    reused: int  # prompt tokens admitted this step that were already in the KV cache
    seconds: float  # time spent in llama_decode
    threads: int  # llama.cpp threads chosen for the next step
    sampled: int = 0  # tokens generated (one per sequence sampled, more with drafts kept)
    drafted: int = 0  # draft tokens verified (speculative decoding)
    accepted: int = 0  # of which kept
    # Sequences whose cells hold other tokens than last reported: (seq_id, their block hashes).
    blocks: tuple[tuple[int, tuple[int, ...]], ...] = ()
    cells_in_use: int = 0  # KV cells held by sequences with a choice (idle sequences' cache is free room)
    restores: int = 0  # prompts admitted this step that resumed from a context checkpoint
    full_reprocessing: int = 0  # prompts admitted this step evaluated in full despite a shared prefix


@dataclass(frozen=True)
class BatcherSettings:
    prefill_chunk: int  # most prompt tokens per step while streams generate, so each waits one chunk at most
    reuse_cache: bool  # start a prompt from a cached prefix (prompt cache)
    max_seconds: float  # wall time of one choice; 0: no limit
    drafts: DraftLimits | None = None  # n-gram speculative decoding, unless a request says otherwise
    cache_ram_bytes: int = 0  # sequences' states kept in host memory when new prompts take them
    checkpoints: int = 0  # context checkpoints per sequence, on a memory that cannot be cut back
    cache_disk_bytes: int = 0  # the disk tier under the host cache (0: none)
    cache_disk_path: str = ""
    cache_reuse: int = 0  # llama-server's --cache-reuse: cached runs this long are moved, not evaluated
