"""Prometheus metrics, correct across gunicorn workers (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from flask import Blueprint, Response
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

if TYPE_CHECKING:
    from app.telemetry.request_stats import RequestStats

bp = Blueprint("metrics", __name__)

REQUESTS = Counter("llm_requests_total", "HTTP requests by route and status", ["route", "status"])
PROMPT_TOKENS = Counter("llm_prompt_tokens_total", "Prompt tokens of answered generations")
COMPLETION_TOKENS = Counter("llm_completion_tokens_total", "Generated tokens")
TTFT = Histogram(
    "llm_time_to_first_token_seconds",
    "Time from request to first generated text",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
INTER_TOKEN = Histogram(
    "llm_inter_token_latency_seconds",
    "Time between two pieces of generated text",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1),
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
MODEL_LOAD = Gauge(
    "llm_model_load_seconds", "Time the worker took to load its model", multiprocess_mode="max"
)


def record_request(route: str, status: int, stats: RequestStats) -> None:
    """Count one finished request and what it generated."""
    REQUESTS.labels(route=route, status=str(status)).inc()
    if stats.prompt_tokens:
        PROMPT_TOKENS.inc(stats.prompt_tokens)
    if stats.completion_tokens:
        COMPLETION_TOKENS.inc(stats.completion_tokens)
    if stats.ttft is not None:
        TTFT.observe(stats.ttft)
    for gap in stats.gaps:
        INTER_TOKEN.observe(gap)
    if stats.cancelled:
        CANCELLED.inc()
    if stats.rejected or status in (429, 503) and route.startswith("/v1/"):
        REJECTED.inc()


@bp.get("/metrics")
def scrape() -> Response:
    """Metrics of every worker, in Prometheus' text format."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()  # fresh per scrape, as the multiprocess docs require
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY  # a single process (tests with Flask's client)
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)
