"""The warm set (LLM_WARM_SET): a worker sends itself its model's requests once loaded, caching their prompts.

Each request goes through the app as a client's would (app/api/http/in_process.py): the
same template, tools and cache_control breakpoints, so the prompt it caches is the one
the agent's first turn will send. It runs as its key's owner (so into that tenant's cache
scope, as LLM_CACHE_SHARING has it), at low priority (a client's request takes its
sequence back), one at a time, its answer cut to one token. With the disk tier on, a
prompt cached before a restart is read back from it rather than evaluated again, and the
worker's cells go to it when the worker stops. A pool worker (on-demand models) warms nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from flask import Flask

from app.api.http.in_process import dispatch
from app.serving.internal import InternalCall
from app.settings.config import Config
from app.settings.current import config_of
from app.settings.warm_set import WarmRequest

log = logging.getLogger("app.api.warm_set")


def start(app: Flask) -> None:
    """Warm this worker's cache with its model's requests of the warm set, once the model is loaded."""
    config, engine = config_of(app), app.extensions.get("engine")
    mine = [request for request in config.warm_set if _runs_here(request, config)]
    if not mine or engine is None or "model_holder" in app.extensions:
        return
    threading.Thread(target=_warm, args=(app, engine, mine), daemon=True, name="warm-set").start()


def _runs_here(request: WarmRequest, config: Config) -> bool:
    """Whether this worker's model serves `request`: the one it names, or the chat default."""
    if request.model is None:
        return config.model.id == next(spec.id for spec in config.models if not spec.embedding)
    return config.model.answers_to(request.model)


def _warm(app: Flask, engine: Any, requests: list[WarmRequest]) -> None:
    while not engine.wait_ready(60.0):  # a big model loads for minutes; a failed load ends the worker
        if engine.load_error is not None:
            return
    keys = {key.name: key for _, key in app.extensions.get("api_keys", ())}
    started, answered = time.monotonic(), 0
    for request in requests:
        where = f"line {request.line} ({request.url})"
        try:
            status, _, answer = dispatch(
                app, request.url, request.one_token(), InternalCall(keys.get(request.key or ""))
            )
        except Exception:  # noqa: BLE001 - a warm request must never take the worker down
            log.exception("warm set, %s: not answered", where)
            continue
        if status != 200:
            log.warning("warm set, %s: HTTP %d: %s", where, status, _message(answer))
            continue
        answered += 1
        prompt, cached = _tokens(answer)
        log.info("warm set, %s: %d prompt tokens cached, %d of them read from a cache", where, prompt, cached)
    log.info(
        "warm set: %d of %d requests answered in %.1f s", answered, len(requests), time.monotonic() - started
    )


def _tokens(answer: Any) -> tuple[int, int]:
    """The prompt's tokens and those read from a cache, from the answer's usage in its family's shape."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):  # Ollama's: its prompt's evaluated tokens only
        return (answer.get("prompt_eval_count", 0) if isinstance(answer, dict) else 0), 0
    if "prompt_tokens" in usage:  # chat completions, completions
        return usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    if "cache_read_input_tokens" in usage:  # Anthropic's: the input is in three parts
        read = usage.get("cache_read_input_tokens") or 0
        return usage.get("input_tokens", 0) + (usage.get("cache_creation_input_tokens") or 0) + read, read
    return usage.get("input_tokens", 0), (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)


def _message(answer: Any) -> str:
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error or answer)
