"""llama-server's `timings` object: how long the prompt and the answer took, from a request's own figures.

llama-server sends it on its completions, chat and text alike (the whole answer, and the last
event of a stream; every event with `timings_per_token`), and front-ends show it: tokens per
second of the prompt and of the answer, and how much of the prompt came from the cache. The
prompt's time runs from the request's first sequence to its first token (queueing is not
evaluating); the answer's from there to now.
"""

from __future__ import annotations

import time
from typing import Any

from flask import g, has_app_context

from app.telemetry.request_stats import RequestStats


def figures(
    evaluated: int, cached: int, predicted: int, prompt_seconds: float, predicted_seconds: float
) -> dict[str, Any]:
    """The object, from counts and durations (per-token and per-second figures 0 where nothing was timed)."""
    prompt_ms, predicted_ms = prompt_seconds * 1000, predicted_seconds * 1000
    return {
        "cache_n": cached,
        "prompt_n": evaluated, "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / evaluated if evaluated else 0.0,
        "prompt_per_second": evaluated / prompt_ms * 1000 if prompt_ms > 0 else 0.0,
        "predicted_n": predicted, "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / predicted if predicted else 0.0,
        "predicted_per_second": predicted / predicted_ms * 1000 if predicted_ms > 0 else 0.0,
    }  # fmt: skip


def durations(stats: RequestStats | None = None) -> tuple[float, float]:
    """Seconds of prompt (first sequence to first token) and of answer (first token to now) so far."""
    stats = stats if stats is not None else current()
    now = time.monotonic()
    began = stats.sequence_at if stats.sequence_at is not None else stats.started
    first = stats.started + stats.ttft if stats.ttft is not None else now
    return max(0.0, first - began), max(0.0, now - first)


def of_request(prompt_tokens: int, stats: RequestStats | None = None) -> dict[str, Any]:
    """The object for this request so far, from its figures (g.stats: kept as its chunks flow)."""
    stats = stats if stats is not None else current()
    cached = min(stats.cached_tokens, prompt_tokens)
    return figures(prompt_tokens - cached, cached, stats.completion_tokens, *durations(stats))


def current() -> RequestStats:
    """This request's figures (taken by a presenter in its view: a stream's generator runs outside the
    request's context); none outside a request (a presenter driven directly): nothing timed yet."""
    found = g.get("stats") if has_app_context() else None
    return found if isinstance(found, RequestStats) else RequestStats()
