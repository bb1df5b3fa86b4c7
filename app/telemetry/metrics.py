"""Prometheus metrics, correct across gunicorn workers (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from flask import Blueprint, Flask, Response, current_app
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from app.settings.current import current_config
from app.telemetry import standard_names
from app.telemetry.model_server import ModelServerCollector
from app.telemetry.worker_board import WorkerBoard

if TYPE_CHECKING:
    from app.telemetry.request_stats import RequestStats

bp = Blueprint("metrics", __name__)

REQUESTS = Counter("llm_requests_total", "HTTP requests by route and status", ["route", "status"])
PROMPT_TOKENS = Counter("llm_prompt_tokens_total", "Prompt tokens of answered generations")
COMPLETION_TOKENS = Counter("llm_completion_tokens_total", "Generated tokens")
# Latency histograms per model, with buckets spanning what LLM serving sees (vLLM's choice of
# figures): the wait for a first token, the time per token after it, the queue, the whole request.
TTFT = Histogram(
    "llm_time_to_first_token_seconds",
    "Time from request to first generated text",
    ["model"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
INTER_TOKEN = Histogram(
    "llm_inter_token_latency_seconds",
    "Time between two pieces of generated text",
    ["model"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1),
)
TIME_PER_OUTPUT_TOKEN = Histogram(
    "llm_time_per_output_token_seconds",
    "A request's time per generated token after the first (its mean)",
    ["model"],
    buckets=(0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5),
)
QUEUE_TIME = Histogram(
    "llm_request_queue_seconds",
    "Time a request waited for a free sequence",
    ["model"],
    buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
E2E_LATENCY = Histogram(
    "llm_e2e_request_latency_seconds",
    "Time from request to its last byte, for requests that generated",
    ["model"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300),
)
KEY_REQUESTS = Counter("llm_key_requests_total", "Requests per API key name and status", ["key", "status"])
KEY_PROMPT_TOKENS = Counter("llm_key_prompt_tokens_total", "Prompt tokens per API key name", ["key"])
KEY_COMPLETION_TOKENS = Counter(
    "llm_key_completion_tokens_total", "Generated tokens per API key name", ["key"]
)
CANCELLED = Counter("llm_cancelled_requests_total", "Generations whose client went away")
REJECTED = Counter("llm_rejected_requests_total", "Requests refused for lack of capacity (429/503)")
QUEUE_DEPTH = Gauge("llm_queue_depth", "Choices waiting for a free sequence", multiprocess_mode="livesum")
IN_FLIGHT = Gauge(
    "llm_generations_in_flight",
    "Choices holding a sequence (generating or prefilling)",
    multiprocess_mode="livesum",
)
SEQUENCES_BUSY = Gauge(
    "llm_sequences_busy",
    "Sequences of the batch with a choice, as of the last step",
    multiprocess_mode="livesum",
)
THREADS = Gauge(
    "llm_threads",
    "llama.cpp threads in use (fewer while another process competes for the cores)",
    multiprocess_mode="livesum",
)
BATCH_TOKENS = Histogram(
    "llm_batch_tokens",
    "Tokens decoded per step (one per generating sequence, plus a prompt chunk)",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048),
)
CACHED_PROMPT_TOKENS = Counter(
    "llm_prompt_tokens_cached_total", "Prompt tokens served from the KV cache instead of evaluated"
)
# Models whose memory cannot be cut back (a sliding window, a recurrent state): how prompts resumed.
CHECKPOINT_RESTORES = Counter(
    "llm_prompt_checkpoint_restores_total", "Prompts resumed from a context checkpoint (LLM_CTX_CHECKPOINTS)"
)
FULL_REPROCESSING = Counter(
    "llm_prompt_full_reprocessing_total",
    "Prompts evaluated in full though they shared a cached prefix the memory could not resume",
)
KV_CACHE_BYTES = Gauge(
    "llm_kv_cache_bytes",
    "Memory the workers' KV caches take (LLM_CACHE_TYPE_K/_V and the cells)",
    multiprocess_mode="livesum",
)
# Speculative decoding, under vLLM's names so that its dashboards and alerts read ours.
SPEC_DRAFTS = Counter("vllm:spec_decode_num_drafts", "Drafts verified (speculative decoding)")
SPEC_DRAFT_TOKENS = Counter("vllm:spec_decode_num_draft_tokens", "Draft tokens verified")
SPEC_ACCEPTED_TOKENS = Counter("vllm:spec_decode_num_accepted_tokens", "Draft tokens kept")
MODEL_LOAD = Gauge(
    "llm_model_load_seconds", "Time the worker took to load its model", multiprocess_mode="max"
)
# Models loaded on demand (LLM_MODELS' "load": "on_demand"): each load and how long it took,
# and each unload with its reason (ttl: idle too long, evicted: its worker was needed, request).
MODEL_LOADS = Histogram(
    "llm_model_on_demand_load_seconds",
    "Time an on-demand model took to load",
    ["model"],
    buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160),
)
MODEL_UNLOADS = Counter("llm_model_unloads_total", "On-demand models unloaded", ["model", "reason"])
# Start-up models put to sleep (LLM_SLEEP_IDLE, POST /sleep) and woken by a request or /wake_up.
MODEL_SLEEPS = Counter("llm_model_sleeps_total", "Start-up models put to sleep", ["model", "reason"])
MODEL_WAKES = Histogram(
    "llm_model_wake_seconds",
    "Time a sleeping start-up model took to load again",
    ["model"],
    buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160),
)
WORKERS_ASLEEP = Gauge(
    "llm_workers_asleep", "Workers whose start-up model sleeps", ["model"], multiprocess_mode="livesum"
)


def model_loaded(model: str, seconds: float) -> None:
    """An on-demand model has loaded in `seconds`."""
    MODEL_LOADS.labels(model=model).observe(seconds)


def count_unload(model: str, reason: str) -> None:
    """An on-demand model has been unloaded (ttl, evicted, request, failed)."""
    MODEL_UNLOADS.labels(model=model, reason=reason).inc()


def model_slept(model: str, reason: str) -> None:
    """A start-up model has gone to sleep (idle, or told by POST /sleep)."""
    MODEL_SLEEPS.labels(model=model, reason=reason).inc()
    WORKERS_ASLEEP.labels(model=model).set(1)


def model_woke(model: str, seconds: float) -> None:
    """A sleeping start-up model has loaded again in `seconds`."""
    MODEL_WAKES.labels(model=model).observe(seconds)
    WORKERS_ASLEEP.labels(model=model).set(0)


def record_request(route: str, status: int, stats: RequestStats, model: str, seconds: float) -> None:
    """Count one finished request (of `model`, taking `seconds`) and what it generated."""
    REQUESTS.labels(route=route, status=str(status)).inc()
    if stats.prompt_tokens:
        PROMPT_TOKENS.inc(stats.prompt_tokens)
    if stats.completion_tokens:
        COMPLETION_TOKENS.inc(stats.completion_tokens)
    if stats.key_name is not None:
        KEY_REQUESTS.labels(key=stats.key_name, status=str(status)).inc()
        KEY_PROMPT_TOKENS.labels(key=stats.key_name).inc(stats.prompt_tokens)
        KEY_COMPLETION_TOKENS.labels(key=stats.key_name).inc(stats.completion_tokens)
    if stats.queue_wait is not None:
        QUEUE_TIME.labels(model=model).observe(stats.queue_wait)
    if stats.ttft is not None:
        TTFT.labels(model=model).observe(stats.ttft)
        E2E_LATENCY.labels(model=model).observe(seconds)
        if (per_token := stats.time_per_output_token) is not None:
            TIME_PER_OUTPUT_TOKEN.labels(model=model).observe(per_token)
    for gap in stats.gaps:
        INTER_TOKEN.labels(model=model).observe(gap)
    standard_names.record(stats, model, seconds)
    if stats.cancelled:
        CANCELLED.inc()
    if stats.rejected or status in (429, 503) and route.startswith("/v1/"):
        REJECTED.inc()


class _Reading:
    """This worker's last reading of every worker's counters and histograms, and when it was made."""

    at: float = -1e9
    text: bytes = b""


_last = _Reading()


def _workers_reading(max_age: float) -> bytes:
    # Merging every worker's files is most of a scrape's cost; an endpoint picker scrapes
    # 20 times a second for its gauges (always fresh below), while the counters and
    # histograms serve Prometheus every few seconds: LLM_METRICS_MAX_AGE lets them age.
    now = time.monotonic()
    if max_age <= 0 or now - _last.at >= max_age:
        registry = CollectorRegistry()  # fresh per reading, as the multiprocess docs require
        multiprocess.MultiProcessCollector(registry)
        _last.at, _last.text = now, generate_latest(registry)
    return _last.text


@bp.get("/metrics")
def scrape() -> Response:
    """Metrics of every worker, in Prometheus' text format."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:  # a single process (tests with Flask's client)
        return Response(generate_latest(REGISTRY), mimetype=CONTENT_TYPE_LATEST)
    text = _workers_reading(current_config().metrics_max_age)
    board: WorkerBoard | None = current_app.extensions.get("status_board")
    if board is not None:  # the model server protocol, over every worker
        live = CollectorRegistry()
        adapters = current_app.extensions.get("adapters_by_slot")
        live.register(ModelServerCollector(board, adapters() if adapters is not None else None))
        text += generate_latest(live)
    return Response(text, mimetype=CONTENT_TYPE_LATEST)


def init_app(
    app: Flask, board: WorkerBoard | None, adapters: Callable[[], Mapping[int, Sequence[str]]] | None = None
) -> None:
    """Serve /metrics; `board` holds every worker's figures (None outside gunicorn: this process only);
    `adapters()` names each live worker's LoRA adapters by its slot (vLLM's lora metric)."""
    app.extensions["status_board"] = board
    app.extensions["adapters_by_slot"] = adapters
    app.register_blueprint(bp)
