"""What the server serves and how it fares, as the status routes answer it: the models (and LoRA
adapters served as models) with their state and workers, readiness, and each worker's figures."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from flask import Response, current_app, jsonify

from app import workers as worker_state
from app.api.generation.memory_view import memory_json, speculative_json
from app.api.http import shown
from app.api.http.errors import ModelNotFoundError, ServiceUnavailableError
from app.engine.multimodal.projector import capabilities_of
from app.serving import peers
from app.settings.config import Config
from app.settings.current import current_config
from app.telemetry import worker_board


def ready_models() -> set[int]:
    """The entries of LLM_MODELS that at least one ready worker holds."""
    return {peer.model for peer in _holders() if peer.ready}


def _holders() -> list[peers.Peer]:
    """The live workers holding a model (outside gunicorn: this process alone, seat 0)."""
    state = worker_state.current()
    if state is None:  # one process (tests with Flask's client): this engine alone
        engine, config = current_app.extensions["engine"], current_config()
        return [peers.Peer(0, os.getpid(), 0, config.parallel, config.model_index, engine.ready)]
    return [peer for peer in state.shared.table.peers() if peer.live and peer.model >= 0]


def _model_object(index: int, holders: list[peers.Peer]) -> dict[str, Any]:
    config = current_config()
    spec = config.models[index]
    held = [peer for peer in holders if peer.model == index]
    window = config.for_model(index)
    # llama-server's router names the states so: loaded (a worker serves it), loading, unloaded.
    state = "loaded" if any(p.ready for p in held) else "loading" if held else "unloaded"
    return {
        "id": spec.id,
        "object": "model",
        "created": current_app.extensions["engine"].created,
        "owned_by": "llama.cpp",
        "ready": state == "loaded",
        "kind": "embedding" if spec.embedding else "generation",
        "aliases": list(spec.aliases),
        "load": "on_demand" if spec.on_demand else "startup",
        "ttl": spec.ttl,
        "status": {"value": state},
        "workers": [{"slot": p.seat, "pid": p.pid, "ready": p.ready, "asleep": p.asleep} for p in held],
        "modalities": capabilities_of(
            spec.mmproj
        ).as_json(),  # llama-server's /props names, from the projector
        "parent": None,  # vLLM's: a LoRA adapter names its base model here
        "root": shown.file_path(spec.path),
        **_window(window.n_ctx, window.max_tokens_limit),
        # Anthropic's Models API: the same list answers its SDKs' models.list and retrieve.
        "type": "model",
        "display_name": spec.id,
        "created_at": datetime.fromtimestamp(current_app.extensions["engine"].created, UTC).isoformat(),
    }


def _window(n_ctx: int, max_tokens: int) -> dict[str, int]:
    """A request's context window, in the fields each client family reads it from: vLLM's
    max_model_len, OpenRouter's and LM Studio's context_length, llama-server's n_ctx, Anthropic's
    max_input_tokens and max_tokens (the largest answer a request may ask for)."""
    return {
        "max_model_len": n_ctx,
        "context_length": n_ctx,
        "n_ctx": n_ctx,
        "max_input_tokens": n_ctx,
        "max_tokens": min(max_tokens, n_ctx),
    }


def models_listed() -> Response:
    """Every model this server serves, with its state and the workers holding it."""
    holders = _holders()
    listed = []
    for index, spec in enumerate(current_config().models):
        listed.append(_model_object(index, holders))
        listed.extend(_adapter_object(index, lora.id, holders) for _, lora in spec.live_adapters())
    ids = [model["id"] for model in listed]
    # OpenAI's list, with Anthropic's paging fields (one page: every model).
    return jsonify({"object": "list", "data": listed, "has_more": False, "first_id": ids[0] if ids else None,
                    "last_id": ids[-1] if ids else None})  # fmt: skip


def model_found(model_id: str) -> Response:
    """One served model (or LoRA adapter served as a model), by id."""
    for index, spec in enumerate(current_config().models):
        if spec.adapter_named(model_id) is not None:
            return jsonify(_adapter_object(index, model_id, _holders()))
        if spec.answers_to(model_id):
            return jsonify(_model_object(index, _holders()))
    raise ModelNotFoundError(f"The model '{model_id}' does not exist.", param="model")


def _adapter_object(index: int, adapter: str, holders: list[peers.Peer]) -> dict[str, Any]:
    """A LoRA adapter as vLLM lists it: a model of its own whose `parent` is its base model (and whose
    state and workers are its base model's: every worker holding the base holds the adapter)."""
    spec = current_config().models[index]
    path = shown.file_path(spec.loras[spec.adapter_named(adapter) or 0].path)
    return {**_model_object(index, holders), "id": adapter, "aliases": [], "parent": spec.id, "root": path}


def readiness() -> Response:
    """Readiness: 200 once this worker's model is loaded and every served model has a ready worker."""
    state = worker_state.current()
    if state is not None and state.draining:  # leave the load balancer's pool at once; /health stays 200
        raise ServiceUnavailableError("The server is shutting down.")
    engine = current_app.extensions["engine"]
    pool_worker = "model_holder" in current_app.extensions  # its model comes and goes: not its readiness
    sleeper = current_app.extensions.get("sleeper")  # a sleeping (or waking) model is healthy: ready
    resting = sleeper is not None and (sleeper.asleep or sleeper.waking)
    if not engine.ready and not pool_worker and not resting:
        detail = "failed to load (see the server log)" if engine.load_error else "loading"
        raise ServiceUnavailableError(f"The model is {detail}.")
    config = current_config()
    ready = ready_models()
    missing = [s.id for index, s in enumerate(config.models) if index not in ready and not s.on_demand]
    if missing:
        raise ServiceUnavailableError(f"No worker has {', '.join(missing)} ready yet.")
    return jsonify({"status": "ok", "model": config.model_id or None})


def workers_listed() -> Response:
    """Each gunicorn worker: its model, whether it generates, its queue and its tokens per second."""
    config, state = current_config(), worker_state.current()
    listed = []
    if state is not None:  # none outside gunicorn
        for peer in state.shared.table.peers():
            if peer.live:  # else being forked: nothing to show yet
                listed.append(_worker_row(config, peer, state.shared.board.read(peer.seat)))
    return jsonify({"object": "list", "window_seconds": worker_board.WINDOW, "data": listed})


def _worker_row(config: Config, peer: peers.Peer, figures: worker_board.WorkerFigures) -> dict[str, Any]:
    models = config.models
    return {
        "slot": peer.seat,
        "pid": peer.pid,
        "model": models[peer.model].id if 0 <= peer.model < len(models) else None,
        "ready": peer.ready,
        "asleep": peer.asleep,
        "on_demand": peer.pool,
        "idle_seconds": round(peer.idle_seconds, 1) if peer.pool and peer.model >= 0 else None,
        "sequences": peer.capacity,
        "running": figures.running,
        "waiting": figures.waiting,
        "generating": figures.running > 0,
        "greenlets": figures.greenlets,
        "greenlets_counted_at": figures.greenlets_counted_at,
        "tokens_last_minute": figures.tokens_last_minute,
        "tokens_per_second": figures.tokens_per_second,
        "load_seconds": round(figures.load_seconds, 3) if figures.load_seconds else None,
        "kv_cache": _kv_cache(config, peer.model, figures),
        "memory": _memory(figures),
        "speculative": _speculative(config, peer.model, figures),
    }


def _kv_cache(config: Config, model: int, figures: worker_board.WorkerFigures) -> dict[str, Any] | None:
    """The worker's KV cache: its cells, their types (its model's settings) and the memory they take."""
    if not figures.kv_cells or not 0 <= model < len(config.models):
        return None  # not loaded yet, or an embedding model (no KV cache kept)
    held = config.for_model(model)
    return {
        "cells": figures.kv_cells,
        "type_k": held.cache_type_k,
        "type_v": held.cache_type_v,
        "bytes": figures.kv_bytes,
        "bytes_per_sequence": figures.kv_bytes // held.parallel,
    }


def _memory(figures: worker_board.WorkerFigures) -> dict[str, Any] | None:
    """The worker's model memory, and how its prompts resumed (None until a generating model loads)."""
    held = figures.memory
    if held is None:
        return None
    return {
        **memory_json(held.kind, held.checkpoints),
        "checkpoint_restores": held.checkpoint_restores,
        "full_reprocessing": held.full_reprocessing,
    }


def _speculative(config: Config, model: int, figures: worker_board.WorkerFigures) -> dict[str, Any] | None:
    """Speculative decoding in the worker: its type, whether its memory lets it run, the draft tokens
    it verified and kept."""
    if not 0 <= model < len(config.models) or config.models[model].embedding:
        return None
    rate = figures.accepted / figures.drafted if figures.drafted else None
    memory = figures.memory.kind if figures.memory is not None else None
    return {
        **speculative_json(memory, config.for_model(model).spec_type),
        "draft_tokens": figures.drafted,
        "accepted_tokens": figures.accepted,
        "acceptance_rate": None if rate is None else round(rate, 4),
    }
