"""LLM_MODELS: the models one server serves, each on workers of its own, and which worker holds which."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError

from app.settings.model_entries import ModelEntrySchema, first_problem

POOL = -1  # the "model" of an on-demand pool worker that holds none


@dataclass(frozen=True)
class LoraSpec:
    """A LoRA adapter loaded with its model: requests name it by `id` (or its index, as llama-server's
    integer ids), and `scale` is its global scale (0: loaded, applied only where a request asks)."""

    id: str
    path: str
    scale: float = 1.0
    runtime: bool = False  # loaded at run time (POST /v1/load_lora_adapter), not by LLM_MODELS
    loaded: bool = True  # False: its place kept (unloaded, or still being checked); nothing names it


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One served model: its id, its GGUF file, how many workers hold it, and its own settings."""

    id: str
    path: str
    workers: int = 1
    n_ctx: int | None = None  # else LLM_N_CTX
    parallel: int | None = None  # else LLM_PARALLEL
    chat_template: str | None = None  # a Jinja template instead of the GGUF's own
    pooling: str | None = None  # embeddings: instead of the GGUF's own pooling type
    embedding: bool = False  # an embedding model: /v1/embeddings only
    chat_format: str | None = None  # the tool-call format, instead of the one read from the template
    cache_type_k: str | None = None  # else LLM_CACHE_TYPE_K
    cache_type_v: str | None = None  # else LLM_CACHE_TYPE_V
    spec_type: str | None = None  # else LLM_SPEC_TYPE
    spec_max: int | None = None  # else LLM_SPEC_MAX
    draft: str | None = None  # a smaller GGUF with the same vocabulary, drafting (else LLM_SPEC_DRAFT)
    aliases: tuple[str, ...] = ()  # other ids requests may name it by (llama-server's --alias)
    on_demand: bool = False  # loaded by a pool worker when first asked for, not at start-up
    ttl: int | None = None  # on demand: seconds idle before its worker unloads it (else kept till evicted)
    loras: tuple[LoraSpec, ...] = ()  # LoRA adapters loaded with it (llama-server's --lora)
    swa_full: bool | None = None  # else LLM_SWA_FULL
    ctx_checkpoints: int | None = None  # else LLM_CTX_CHECKPOINTS
    mmproj: str | None = None  # its multimodal projector GGUF (llama-server's --mmproj)

    def describe(self, index: int) -> str:
        return f"entry {index} ({self.id!r})" if self.id else f"entry {index}"

    def answers_to(self, name: str) -> bool:
        """Whether a request's `model` names this one: by its id, an alias, or one of its LoRA adapters
        (vLLM's adapters as models: the base model with that adapter)."""
        return name == self.id or name in self.aliases or self.adapter_named(name) is not None

    def adapter_named(self, name: str | None) -> int | None:
        """The index of the loaded LoRA adapter whose id is `name`, if this model has one."""
        return next((n for n, lora in self.live_adapters() if lora.id == name), None)

    def live_adapters(self) -> list[tuple[int, LoraSpec]]:
        """The loaded LoRA adapters with their indexes (which stay when another is unloaded)."""
        return [(n, lora) for n, lora in enumerate(self.loras) if lora.loaded]

    def configured_adapters(self) -> tuple[LoraSpec, ...]:
        """The adapters LLM_MODELS gives it (the first of `loras`; those loaded at run time follow)."""
        return tuple(lora for lora in self.loras if not lora.runtime)


def parse(raw: str) -> tuple[ModelSpec, ...]:
    """A JSON list of models; the first problem raises ValueError naming the entry."""
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg})") from None
    if not isinstance(entries, list) or not entries:
        raise ValueError('must be a JSON list of models, e.g. [{"id": "chat", "path": "/m.gguf"}]')
    specs = tuple(_entry(entry, index) for index, entry in enumerate(entries))
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        for name in (spec.id, *spec.aliases, *(lora.id for lora in spec.loras)):
            if name in seen:
                raise ValueError(
                    f"{spec.describe(index)}: {name!r} names two models (ids, aliases and LoRA "
                    "adapters' ids, which requests may name as models, are unique)"
                )
            seen.add(name)
    return specs


_ENTRY = ModelEntrySchema()


def _entry(entry: Any, index: int) -> ModelSpec:
    where = (
        f"entry {index} ({entry['id']!r})"
        if isinstance(entry, dict) and isinstance(entry.get("id"), str)
        else f"entry {index}"
    )
    try:
        given = _ENTRY.load(entry)
    except ValidationError as exc:
        raise ValueError(f"{where}: {first_problem(exc.messages)}") from None
    loras = tuple(LoraSpec(**lora) for lora in given.pop("loras"))
    return ModelSpec(**given, loras=loras)


def model_for_new_worker(
    specs: Sequence[ModelSpec], holding: Sequence[int], pool: int = 0, pool_size: int = 0
) -> int:
    """Which model a worker about to start should hold, given what the live pinned workers hold
    (`holding`) and how many pool workers live (`pool`, of `pool_size`); POOL for a pool worker.

    The one furthest below its share: so a dead worker's replacement holds its model,
    and during a reload (old and new workers side by side) the new ones spread evenly.
    The on-demand pool is one more share, of LLM_ON_DEMAND_WORKERS workers.
    """
    shares = [
        (sum(1 for held in holding if held == index) / spec.workers, index)
        for index, spec in enumerate(specs)
        if spec.workers
    ]
    if pool_size:
        shares.append((pool / pool_size, len(specs)))  # after every entry when tied
    fullness, index = min(shares)
    return POOL if index == len(specs) else index
