"""llama-server's and vLLM's metric names beside ours, so that their dashboards and alerts read this server.

llama-server's `/metrics` (tools/server/server-task.cpp, `to_metrics`): `llamacpp:` counters
of prompt and generated tokens and the time spent on each, decode calls, the longest
sequence. vLLM's (vllm/v1/metrics/loggers.py): per-request histograms and counters labelled
`model_name`, with vLLM's buckets, which its Grafana dashboard queries. Each is recorded
where ours are, from the same figures: at a request's end, and at each engine step.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from app.telemetry.request_stats import RequestStats

# llama-server's: instance-wide counters (no labels), as its dashboards sum them.
LLAMA_PROMPT_TOKENS = Counter(
    "llamacpp:prompt_tokens", "Number of prompt tokens processed, excluding cached tokens"
)
LLAMA_PROMPT_CACHED = Counter(
    "llamacpp:prompt_tokens_cached", "Number of prompt tokens reused from the cache"
)
LLAMA_PROMPT_SECONDS = Counter("llamacpp:prompt_seconds", "Total time spent processing prompts")
LLAMA_PREDICTED = Counter("llamacpp:tokens_predicted", "Number of generation tokens processed")
LLAMA_PREDICTED_SECONDS = Counter("llamacpp:tokens_predicted_seconds", "Total time spent generating tokens")
LLAMA_DECODES = Counter("llamacpp:n_decode", "Total number of llama_decode() calls")
LLAMA_DRAFTS = Counter(
    "llamacpp:spec_decode_num_drafts", "Speculative: Total speculative decoding verification steps"
)
LLAMA_DRAFT_TOKENS = Counter(
    "llamacpp:spec_decode_num_draft_tokens", "Speculative: Total draft tokens generated"
)
LLAMA_ACCEPTED = Counter(
    "llamacpp:spec_decode_num_accepted_tokens", "Speculative: Total draft tokens accepted by the target model"
)
LLAMA_TOKENS_MAX = Gauge(
    "llamacpp:n_tokens_max",
    "Largest observed sequence length (prompt + generation)",
    multiprocess_mode="max",
)

# vLLM's buckets (vllm/v1/metrics/loggers.py), so that its dashboard's quantiles mean the same.
_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
            120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
         20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
_PER_TOKEN = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
              20.0, 40.0, 80.0)  # fmt: skip
_TOKENS = tuple(float(m * 10**e) for e in range(7) for m in (1, 2, 5))  # vLLM's 1-2-5 series
_MODEL = ["model_name"]

VLLM_PROMPT_TOKENS = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", _MODEL)
VLLM_GENERATION_TOKENS = Counter("vllm:generation_tokens", "Number of generation tokens processed.", _MODEL)
VLLM_SUCCESS = Counter(
    "vllm:request_success", "Count of successfully processed requests.", [*_MODEL, "finished_reason"]
)
VLLM_PREFIX_QUERIES = Counter(
    "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", _MODEL
)
VLLM_PREFIX_HITS = Counter(
    "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", _MODEL
)
VLLM_TTFT = Histogram(
    "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _MODEL, buckets=_TTFT
)
VLLM_ITL = Histogram(
    "vllm:inter_token_latency_seconds",
    "Histogram of inter-token latency in seconds.",
    _MODEL,
    buckets=_PER_TOKEN,
)
VLLM_TPOT = Histogram(
    "vllm:request_time_per_output_token_seconds",
    "Histogram of time_per_output_token_seconds per request.",
    _MODEL,
    buckets=_PER_TOKEN,
)
VLLM_E2E = Histogram(
    "vllm:e2e_request_latency_seconds",
    "Histogram of e2e request latency in seconds.",
    _MODEL,
    buckets=_LATENCY,
)
VLLM_QUEUE = Histogram(
    "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", _MODEL,
    buckets=_LATENCY,
)  # fmt: skip
VLLM_PREFILL = Histogram(
    "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", _MODEL,
    buckets=_LATENCY,
)  # fmt: skip
VLLM_DECODE = Histogram(
    "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", _MODEL,
    buckets=_LATENCY,
)  # fmt: skip
VLLM_INFERENCE = Histogram(
    "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", _MODEL,
    buckets=_LATENCY,
)  # fmt: skip
VLLM_REQUEST_PROMPT = Histogram(
    "vllm:request_prompt_tokens", "Number of prefill tokens processed.", _MODEL, buckets=_TOKENS
)
VLLM_REQUEST_GENERATION = Histogram(
    "vllm:request_generation_tokens", "Number of generation tokens processed.", _MODEL, buckets=_TOKENS
)
# vLLM's finished_reason values for ours (a call is a stop; a hang-up or failure an abort).
_FINISHED = {"stop": "stop", "tool_calls": "stop", "length": "length"}


def record(stats: RequestStats, model: str, seconds: float) -> None:
    """A request that reached the engine, under both servers' names: its tokens and outcome, and the
    time of each phase when it generated text."""
    if not stats.prompt_tokens:
        return
    labelled = {"model_name": model}
    LLAMA_PROMPT_TOKENS.inc(max(stats.prompt_tokens - stats.cached_tokens, 0))
    LLAMA_PROMPT_CACHED.inc(stats.cached_tokens)
    LLAMA_PREDICTED.inc(stats.completion_tokens)
    _longest.tokens = max(_longest.tokens, stats.prompt_tokens + stats.longest_choice)
    LLAMA_TOKENS_MAX.set(_longest.tokens)
    VLLM_PROMPT_TOKENS.labels(**labelled).inc(stats.prompt_tokens)
    VLLM_GENERATION_TOKENS.labels(**labelled).inc(stats.completion_tokens)
    VLLM_PREFIX_QUERIES.labels(**labelled).inc(stats.prompt_tokens)
    VLLM_PREFIX_HITS.labels(**labelled).inc(stats.cached_tokens)
    reason = "abort" if stats.cancelled else _FINISHED.get(stats.finish_reason or "", "abort")
    VLLM_SUCCESS.labels(model_name=model, finished_reason=reason).inc()
    VLLM_REQUEST_PROMPT.labels(**labelled).observe(stats.prompt_tokens)
    VLLM_REQUEST_GENERATION.labels(**labelled).observe(stats.completion_tokens)
    if stats.ttft is not None:
        _phases(stats, stats.ttft, labelled, seconds)


def _phases(stats: RequestStats, ttft: float, labelled: dict[str, str], seconds: float) -> None:
    """Waiting, prefill (from its first sequence to its first text) and decode (the rest)."""
    queued = stats.queue_wait or 0.0
    prefill, decode = max(ttft - queued, 0.0), max(seconds - ttft, 0.0)
    LLAMA_PROMPT_SECONDS.inc(prefill)
    LLAMA_PREDICTED_SECONDS.inc(decode)
    VLLM_TTFT.labels(**labelled).observe(ttft)
    VLLM_E2E.labels(**labelled).observe(seconds)
    VLLM_QUEUE.labels(**labelled).observe(queued)
    VLLM_PREFILL.labels(**labelled).observe(prefill)
    VLLM_DECODE.labels(**labelled).observe(decode)
    VLLM_INFERENCE.labels(**labelled).observe(prefill + decode)
    if (per_token := stats.time_per_output_token) is not None:
        VLLM_TPOT.labels(**labelled).observe(per_token)
    itl = VLLM_ITL.labels(**labelled)
    for gap in stats.gaps:
        itl.observe(gap)


class _Longest:
    """This worker's longest request so far (the gauge's max over the workers is the instance's)."""

    tokens = 0


_longest = _Longest()


def decoded(calls: int = 1) -> None:
    """`calls` llama_decode calls of the engine."""
    LLAMA_DECODES.inc(calls)


def drafted(tokens: int, accepted: int) -> None:
    """One draft verified: its tokens, and those the model kept."""
    LLAMA_DRAFTS.inc()
    LLAMA_DRAFT_TOKENS.inc(tokens)
    LLAMA_ACCEPTED.inc(accepted)
