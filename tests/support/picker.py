"""A scraper that reads a pod's /metrics as the inference gateway's endpoint picker does.

As llm-d router's core metrics extractor (pkg/epp/framework/plugins/datalayer/extractor/
metrics: `getLatestMetric`, `extractValue`): Prometheus text format, the first series of
each name whose labels match (no timestamps: the first one wins), its value only if the
family is a gauge or a counter (anything else reads as 0), and the cache configuration
from the labels `block_size` and `num_gpu_blocks` of `vllm:cache_config_info`.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

# The vLLM engine's mapping, the picker's default (`defaultEngineConfigs` in factories.go).
QUEUED, RUNNING, KV_USAGE, CACHE_INFO = (
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:cache_config_info",
)


@dataclass(frozen=True)
class PodMetrics:
    """What the picker stores for one pod after a scrape."""

    waiting: int
    running: int
    kv_usage: float
    block_size: int
    num_blocks: int


def read_first_series(text: str) -> dict[str, tuple[str, dict[str, str], float]]:
    """Each metric family's type, and its first sample's labels and value."""
    first: dict[str, tuple[str, dict[str, str], float]] = {}
    for family in text_string_to_metric_families(text):
        if family.samples:
            sample = family.samples[0]
            first[family.name] = (family.type, sample.labels, sample.value)
    return first


def scrape(url: str, client: httpx.Client | None = None) -> PodMetrics:
    """GET `url`/metrics and extract as the picker does; a missing metric fails, as it is an error there."""
    response = (client or httpx).get(url + "/metrics", timeout=5)
    response.raise_for_status()
    first = read_first_series(response.text)

    def value(name: str) -> float:
        kind, _, number = first[name]
        return number if kind in ("gauge", "counter") else 0.0

    _, labels, _ = first[CACHE_INFO]
    return PodMetrics(
        waiting=int(value(QUEUED)),
        running=int(value(RUNNING)),
        kv_usage=value(KV_USAGE),
        block_size=int(labels["block_size"]),
        num_blocks=int(labels["num_gpu_blocks"]),
    )
