"""The settings that follow from others, worked out in small steps, each checking what it relies on."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from app.settings import cpu
from app.settings.keys import keys_checked
from app.settings.models import POOL, ModelSpec
from app.settings.setting import ConfigError

Parsed = dict[str, Any]
# max_tokens' limit when the context shifts and none is set (llama-server has none).
UNLIMITED = 1 << 30  # setting name -> value, as Config takes them


def derive(raw: Parsed) -> Parsed:
    """The parsed variables (`raw`, plus `model_index`) completed and cross-checked, for Config(**...)."""
    parsed = {**raw, "raw": raw, "model_index": raw.get("model_index", 0)}
    for step in (
        _keys,
        _models,
        _workers,
        _worker_model,
        _threads,
        _batch_room,
        _kv_cells,
        _token_limits,
        _disk_cache,
        _warm_set,
        _store,
        _grace,
    ):
        step(parsed)
    return parsed


def _grace(parsed: Parsed) -> None:
    """A drain's grace, unless given: the longest a request can take (its queue wait, then its
    generation), so that stopping the server cuts no stream; an hour if generations are unbounded."""
    if parsed["graceful_timeout"] is None:
        longest = parsed["max_generation_seconds"]
        parsed["graceful_timeout"] = math.ceil(longest + parsed["queue_timeout"]) if longest else 3600


def _disk_cache(parsed: Parsed) -> None:
    """The disk tier needs its folder, and keeps what the host cache evicts: it needs one too."""
    if not parsed["cache_disk_mb"]:
        return
    if not parsed["cache_disk_path"]:
        raise ConfigError("LLM_CACHE_DISK_PATH: a folder is needed when LLM_CACHE_DISK_MB is set")
    if not parsed["cache_ram_mb"]:
        raise ConfigError(
            "LLM_CACHE_DISK_MB needs LLM_CACHE_RAM_MB above 0: the disk keeps what host memory evicts"
        )


def _warm_set(parsed: Parsed) -> None:
    """Each line of the warm set names a key that exists (one is needed when keys are set: a request
    without one is refused) and a model loaded at start-up (a pool worker's come and go)."""
    names = {key.name for key in parsed["api_keys"]}
    for request in parsed["warm_set"]:
        where = f"LLM_WARM_SET, line {request.line}"
        if names and request.key not in names:
            raise ConfigError(f"{where}: give the name of a key in LLM_API_KEYS(_FILE) or LLM_ADMIN_KEYS, "
                              "whose cache the prompt goes to" if request.key is None else
                              f"{where}: {request.key!r} is not the name of a configured key")  # fmt: skip
        if not names and request.key is not None:
            raise ConfigError(f"{where}: names key {request.key!r}, but no API keys are configured")
        model = request.model
        if model is not None and not any(s.answers_to(model) and not s.on_demand for s in parsed["models"]):
            raise ConfigError(f"{where}: model {model!r} is not one of LLM_MODELS loaded at start-up")


def _keys(parsed: Parsed) -> None:
    """LLM_API_KEYS, LLM_API_KEYS_FILE and LLM_ADMIN_KEYS together: no name and no key twice."""
    try:
        parsed["api_keys"] = keys_checked(
            (parsed["api_keys"] or ()) + (parsed["api_keys_file"] or ()) + (parsed["admin_keys"] or ())
        )
    except ValueError as exc:
        raise ConfigError(f"LLM_API_KEYS, LLM_API_KEYS_FILE and LLM_ADMIN_KEYS: {exc}") from None
    names = {key.name for key in parsed["api_keys"]}
    unknown = [name for group in parsed["cache_sharing"].groups for name in group if name not in names]
    if unknown:  # a typo would silently leave that key alone, and its group's cache cold
        raise ConfigError(
            f"LLM_CACHE_SHARING: {unknown[0]!r} is not the name of a key in LLM_API_KEYS(_FILE) or "
            "LLM_ADMIN_KEYS (a key written without a name is named by a digest of it: give it one, name:key)"
        )


def _models(parsed: Parsed) -> None:
    """Without LLM_MODELS, one model: LLM_MODEL_PATH (named LLM_MODEL_ID or its file) on every worker."""
    parsed["model_id"] = parsed["model_id"] or Path(parsed["model_path"]).stem
    parsed["workers_given"] = parsed["workers"] is not None
    parsed["models_given"] = parsed["models"] is not None
    if parsed["models"] is None:
        parsed["models"] = (
            ModelSpec(
                id=parsed["model_id"],
                path=parsed["model_path"],
                workers=parsed["workers"] or 1,
                mmproj=parsed["mmproj"],
            ),
        )
    elif parsed["mmproj"]:
        raise ConfigError(
            'LLM_MMPROJ applies to LLM_MODEL_PATH; with LLM_MODELS, give the entry its "mmproj"'
        )


def _workers(parsed: Parsed) -> None:
    """LLM_WORKERS, when given beside LLM_MODELS, must be the sum of the entries' workers and the pool's."""
    _pool(parsed)
    asked = sum(spec.workers for spec in parsed["models"]) + parsed["on_demand_workers"]
    if parsed["models_given"] and parsed["workers_given"] and asked != parsed["workers"]:
        raise ConfigError(
            f"LLM_MODELS asks for {asked} workers in all but LLM_WORKERS={parsed['workers']}: "
            "give each entry its share of the workers"
        )
    parsed["workers"] = parsed["workers"] or asked


def _pool(parsed: Parsed) -> None:
    """On-demand entries need a pool to load them in (one worker unless told); a pool needs them."""
    on_demand = [spec.id for spec in parsed["models"] if spec.on_demand]
    pool = parsed["on_demand_workers"]
    if pool is None:
        pool = 1 if on_demand else 0
    elif on_demand and pool == 0:
        raise ConfigError(
            f"LLM_ON_DEMAND_WORKERS=0: LLM_MODELS loads {', '.join(on_demand)} on demand, which needs "
            "at least one worker to load it in"
        )
    elif pool and not on_demand:
        raise ConfigError(
            f'LLM_ON_DEMAND_WORKERS={pool}: no LLM_MODELS entry has "load": "on_demand" for them to load'
        )
    parsed["on_demand_workers"] = pool


def _worker_model(parsed: Parsed) -> None:
    """The settings of the model this worker holds: its own where its LLM_MODELS entry gives them."""
    if parsed["model_index"] == POOL:  # a pool worker holding none: the server-wide settings
        parsed.update(model_id="", chat_template=None, pooling=None, embedding=False, chat_format=None)
        parsed.update(mmproj=None)
        _speculation(parsed, ModelSpec(id="", path=parsed["model_path"]))
        return
    spec: ModelSpec = parsed["models"][parsed["model_index"]]
    parsed.update(model_path=spec.path, model_id=spec.id, n_ctx=spec.n_ctx or parsed["n_ctx"])
    parsed.update(parallel=spec.parallel or parsed["parallel"], chat_template=spec.chat_template)
    parsed.update(pooling=spec.pooling, embedding=spec.embedding, chat_format=spec.chat_format)
    parsed.update(mmproj=spec.mmproj)
    parsed.update(cache_type_k=spec.cache_type_k or parsed["cache_type_k"])
    parsed.update(cache_type_v=spec.cache_type_v or parsed["cache_type_v"])
    if spec.swa_full is not None:
        parsed.update(swa_full=spec.swa_full)
    if spec.ctx_checkpoints is not None:
        parsed.update(ctx_checkpoints=spec.ctx_checkpoints)
    _invariance(parsed, spec)
    _speculation(parsed, spec)


def _invariance(parsed: Parsed, spec: ModelSpec) -> None:
    """A quantized V cache needs flash attention, which batch-invariant kernels go without."""
    if parsed["batch_invariant"] and parsed["cache_type_v"] not in ("f16", "f32", "bf16"):
        where = (
            f"LLM_MODELS {spec.describe(parsed['model_index'])} cache_type_v"
            if spec.cache_type_v
            else ("LLM_CACHE_TYPE_V")
        )
        raise ConfigError(
            f"{where}={parsed['cache_type_v']}: a quantized V cache needs flash attention, which "
            "LLM_BATCH_INVARIANT=1 turns off; set LLM_BATCH_INVARIANT=0 (answers then depend on load)"
        )


def _speculation(parsed: Parsed, spec: ModelSpec) -> None:
    """The entry's speculative decoding; an entry that names a draft model drafts with it unless it
    says otherwise, and drafting with a model needs one."""
    parsed.update(spec_max=spec.spec_max or parsed["spec_max"], spec_draft=spec.draft or parsed["spec_draft"])
    parsed.update(spec_type=spec.spec_type or ("draft" if spec.draft else parsed["spec_type"]))
    if parsed["spec_type"] == "draft" and not parsed["spec_draft"]:
        where = (
            f"LLM_MODELS {spec.describe(parsed['model_index'])}"
            if parsed["models_given"]
            else "LLM_SPEC_TYPE"
        )
        raise ConfigError(
            f'{where}: speculative decoding with a draft model needs one (LLM_SPEC_DRAFT or "draft")'
        )


def _threads(parsed: Parsed) -> None:
    """By default the usable cores are shared out between the workers."""
    if parsed["n_threads"] == 0:
        parsed["n_threads"] = max(1, cpu.usable_cores() // parsed["workers"])


def _batch_room(parsed: Parsed) -> None:
    """Each step decodes one token of every sequence, so they must all fit one batch."""
    if parsed["parallel"] > parsed["n_batch"]:
        raise ConfigError(
            f"LLM_PARALLEL={parsed['parallel']}: must not exceed LLM_N_BATCH={parsed['n_batch']} "
            "(each step decodes one token of every sequence)"
        )


def _kv_cells(parsed: Parsed) -> None:
    """By default a whole context per sequence; never less than one request's context in all."""
    parsed["kv_size"] = parsed["kv_size"] or parsed["parallel"] * parsed["n_ctx"]
    if parsed["kv_size"] < parsed["n_ctx"]:
        raise ConfigError(
            f"LLM_KV_SIZE={parsed['kv_size']}: must be at least LLM_N_CTX={parsed['n_ctx']}, "
            "the most one request may use"
        )


def _token_limits(parsed: Parsed) -> None:
    """max_tokens' limit defaults to the context (none when the context shifts); its default must
    fit under the limit."""
    shifts = parsed["context_shift"]
    limit = parsed["max_tokens_limit"] or (UNLIMITED if shifts else parsed["n_ctx"])
    if limit > parsed["n_ctx"] and not shifts:
        raise ConfigError(f"LLM_MAX_TOKENS_LIMIT={limit}: must not exceed LLM_N_CTX={parsed['n_ctx']}")
    parsed["max_tokens_limit"] = limit
    if parsed["default_max_tokens"] > limit:
        raise ConfigError(
            f"LLM_DEFAULT_MAX_TOKENS={parsed['default_max_tokens']}: "
            f"must not exceed the max_tokens limit ({limit})"
        )


def _store(parsed: Parsed) -> None:
    """The URL from LLM_STORE_URL or LLM_STORE_URL_FILE; without either, a SQLite file in LLM_DATA_DIR."""
    if parsed["store_url_file"] is not None:
        if parsed["store_url"] is not None:
            raise ConfigError("LLM_STORE_URL_FILE: set it or LLM_STORE_URL, not both")
        parsed["store_url"] = parsed["store_url_file"]
    if parsed["store_url"] is None:
        parsed["store_url"] = f"sqlite:///{Path(parsed['data_dir']) / 'store.sqlite3'}"
