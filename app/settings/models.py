"""LLM_MODELS: the models one server serves, each on workers of its own, and which worker holds which."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.chat_formats.detect import FORMATS, by_name
from app.settings import values

POOLINGS = ("mean", "cls", "last", "rank")
# llama-server's --cache-type-k/-v choices; each is a ggml type llama.cpp can store a KV cell in.
KV_TYPES = ("f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
# Speculative decoding: off, drafts from the choice's own tokens, or from a smaller model.
SPEC_TYPES = ("none", "ngram", "draft")
# Loaded with the server on its own workers, or by a worker of the on-demand pool when first asked for.
LOADS = ("startup", "on_demand")
POOL = -1  # the "model" of an on-demand pool worker that holds none
_KEYS = {
    "id", "path", "workers", "n_ctx", "parallel", "chat_template", "chat_format", "pooling", "embedding",
    "cache_type_k", "cache_type_v", "spec_type", "spec_max", "draft", "aliases", "load", "ttl", "loras",
    "swa_full", "ctx_checkpoints",
}  # fmt: skip
_NUMBERS = (
    ("workers", 1, 64, 1), ("n_ctx", 1, 1 << 20, None), ("parallel", 1, 256, None),
    ("spec_max", 1, 256, None), ("ttl", 1, 7 * 86400, None), ("ctx_checkpoints", 0, 256, None),
)  # fmt: skip


@dataclass(frozen=True)
class LoraSpec:
    """A LoRA adapter loaded with its model: requests name it by `id` (or its index, as llama-server's
    integer ids), and `scale` is its global scale (0: loaded, applied only where a request asks)."""

    id: str
    path: str
    scale: float = 1.0


@dataclass(frozen=True)
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

    def describe(self, index: int) -> str:
        return f"entry {index} ({self.id!r})" if self.id else f"entry {index}"

    def answers_to(self, name: str) -> bool:
        """Whether a request's `model` names this one, by its id or an alias."""
        return name == self.id or name in self.aliases


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
        for name in (spec.id, *spec.aliases):
            if name in seen:
                raise ValueError(
                    f"{spec.describe(index)}: {name!r} names two models (ids and aliases are unique)"
                )
            seen.add(name)
    return specs


def _entry(entry: Any, index: int) -> ModelSpec:
    where = f"entry {index}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be an object")
    if isinstance(entry.get("id"), str):
        where = f"entry {index} ({entry['id']!r})"
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    if not isinstance(entry.get("id"), str) or not entry["id"].strip():
        raise ValueError(f"{where}: needs an id, a non-empty string")
    try:
        path = values.model_file(entry.get("path") or "")
    except ValueError as exc:
        raise ValueError(f"{where}: path {exc}") from None
    numbers: dict[str, int | None] = {}
    load = entry.get("load", "startup")
    if load not in LOADS:
        raise ValueError(f"{where}: load must be one of {', '.join(LOADS)}")
    if load == "on_demand" and entry.get("workers", 0) != 0:
        raise ValueError(f"{where}: an on-demand entry has no workers of its own (LLM_ON_DEMAND_WORKERS)")
    if load != "on_demand" and entry.get("ttl") is not None:
        raise ValueError(f'{where}: ttl applies only to an entry with "load": "on_demand"')
    for key, low, high, default in _NUMBERS:
        if key == "workers" and load == "on_demand":
            continue
        value = entry.get(key, default)
        if value is not None and (type(value) is not int or not low <= value <= high):
            raise ValueError(f"{where}: {key} must be an integer from {low} to {high}")
        numbers[key] = value
    if entry.get("pooling") is not None and entry["pooling"] not in POOLINGS:
        raise ValueError(f"{where}: pooling must be one of {', '.join(POOLINGS)}")
    if entry.get("chat_template") is not None and not isinstance(entry["chat_template"], str):
        raise ValueError(f"{where}: chat_template must be a string (a Jinja template)")
    chat_format = entry.get("chat_format")
    if chat_format is not None and (not isinstance(chat_format, str) or not _known_format(chat_format)):
        raise ValueError(f"{where}: chat_format must be one of {', '.join(FORMATS)}")
    for key in ("cache_type_k", "cache_type_v"):
        if entry.get(key) is not None and entry[key] not in KV_TYPES:
            raise ValueError(f"{where}: {key} must be one of {', '.join(KV_TYPES)}")
    if entry.get("spec_type") is not None and entry["spec_type"] not in SPEC_TYPES:
        raise ValueError(f"{where}: spec_type must be one of {', '.join(SPEC_TYPES)}")
    draft = None
    if entry.get("draft") is not None:
        try:
            draft = values.model_file(entry["draft"] if isinstance(entry["draft"], str) else "")
        except ValueError as exc:
            raise ValueError(f"{where}: draft {exc}") from None
    for key in ("embedding", "swa_full"):
        if not isinstance(entry.get(key, False), bool):
            raise ValueError(f"{where}: {key} must be true or false")
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ValueError(f"{where}: aliases must be a list of non-empty strings")
    return ModelSpec(
        entry["id"].strip(), path, 0 if load == "on_demand" else numbers["workers"] or 1, numbers["n_ctx"],
        numbers["parallel"],
        entry.get("chat_template"), entry.get("pooling"), entry.get("embedding", False), chat_format,
        entry.get("cache_type_k"), entry.get("cache_type_v"), entry.get("spec_type"), numbers["spec_max"],
        draft, tuple(alias.strip() for alias in aliases), load == "on_demand", numbers["ttl"],
        _loras(entry.get("loras", []), where), entry.get("swa_full"), numbers["ctx_checkpoints"],
    )  # fmt: skip


def _loras(entries: Any, where: str) -> tuple[LoraSpec, ...]:
    """An entry's `loras`: a list of {"id", "path", "scale"} with ids unique."""
    if not isinstance(entries, list):
        raise ValueError(f'{where}: loras must be a list of {{"id", "path", "scale"}}')
    loras: list[LoraSpec] = []
    for number, lora in enumerate(entries):
        if not isinstance(lora, dict) or set(lora) - {"id", "path", "scale"}:
            raise ValueError(f'{where}: loras[{number}] must be an object with "id", "path" and "scale"')
        if not isinstance(lora.get("id"), str) or not lora["id"].strip():
            raise ValueError(f"{where}: loras[{number}] needs an id, a non-empty string")
        try:
            given = lora.get("path")
            path = values.model_file(given if isinstance(given, str) else "")
        except ValueError as exc:
            raise ValueError(f"{where}: loras[{number}] path {exc}") from None
        scale = lora.get("scale", 1.0)
        if type(scale) not in (int, float) or not -100 <= scale <= 100:
            raise ValueError(f"{where}: loras[{number}] scale must be a number from -100 to 100")
        if any(known.id == lora["id"].strip() for known in loras):
            raise ValueError(f"{where}: loras[{number}]: the id {lora['id']!r} is taken")
        loras.append(LoraSpec(lora["id"].strip(), path, float(scale)))
    return tuple(loras)


def _known_format(name: str) -> bool:
    try:
        by_name(name)
    except KeyError:
        return False
    return True


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
