"""A model's memory as /props and /health/workers show it: what it keeps and how prompts resume on it."""

from __future__ import annotations

from typing import Any

from app.engine.memory import MemoryKind, drafts_off
from app.settings.model_entries import SPEC_TYPES

_COUNT = {"type": "integer", "minimum": 0}
# What memory_json gives, as the OpenAPI documents of /props and /health/workers describe it.
MEMORY_SCHEMA = {
    "type": ["object", "null"],
    "description": "What the model's memory keeps (null for an embedding model, or until loaded)",
    "required": ["type", "sliding_window", "swa_full", "recurrent", "hybrid", "experts", "ctx_checkpoints"],
    "properties": {
        "type": {"enum": ["plain", "swa", "recurrent", "hybrid", "hybrid-swa"]},
        "sliding_window": {"type": ["integer", "null"], "description": "The model's sliding window"},
        "swa_full": {"type": "boolean", "description": "LLM_SWA_FULL: sliding-window layers keep everything"},
        "recurrent": {"type": "boolean", "description": "A recurrent state: it cannot be cut back"},
        "hybrid": {"type": "boolean", "description": "Attention and recurrent layers"},
        "experts": {**_COUNT, "description": "Mixture of experts: experts per layer (0: dense)"},
        "ctx_checkpoints": {**_COUNT, "description": "Checkpoints per sequence (LLM_CTX_CHECKPOINTS)"},
        "checkpoint_restores": {**_COUNT, "description": "/health/workers: prompts resumed from one"},
        "full_reprocessing": {
            **_COUNT,
            "description": "/health/workers: prompts evaluated in full though they shared a cached prefix",
        },
    },
}
SPECULATIVE_PROPERTIES = {
    "type": {"enum": list(SPEC_TYPES), "description": "LLM_SPEC_TYPE"},
    "enabled": {"type": "boolean", "description": "Drafts are made (not where the memory cannot drop them)"},
    "off_reason": {"type": ["string", "null"], "description": "Why drafts are off for this model"},
}


def memory_json(memory: MemoryKind, checkpoints: int) -> dict[str, Any]:
    """The memory's type, its window, and the checkpoints each sequence keeps (0 where none are needed)."""
    return {
        "type": memory.name,
        "sliding_window": memory.sliding or None,
        "swa_full": memory.swa_full,
        "recurrent": memory.recurrent,
        "hybrid": memory.hybrid,
        "experts": memory.experts,
        "ctx_checkpoints": 0 if memory.plain else checkpoints,
    }


def speculative_json(memory: MemoryKind | None, spec_type: str) -> dict[str, Any]:
    """Speculative decoding as configured, and whether this model's memory lets it run (and why not)."""
    reason = drafts_off(memory, spec_type) if memory is not None else ""
    return {"type": spec_type, "enabled": spec_type != "none" and not reason, "off_reason": reason or None}
