"""The model server protocol's metrics (vLLM's names, llama-server's beside them): one series per instance.

The inference gateway's endpoint picker (llm-d router) scrapes each pod's /metrics
every 50 ms and scores pods by queue, running requests and KV-cache use, reading the
first series of each name it finds. Per-worker series would have it read one worker
only, so these are added up over every gunicorn worker at scrape time, from the
worker board in shared memory: fresh on every scrape, and cheap (no file per worker).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.engine.prefix_blocks import BLOCK
from app.telemetry.worker_board import WorkerBoard


class ModelServerCollector(Collector):
    """Yields the protocol's gauges for the whole instance, read off `board` at each scrape."""

    def __init__(self, board: WorkerBoard) -> None:
        self._board = board

    def collect(self) -> Iterator[Metric]:
        pool = self._board.totals()
        waiting = "Requests waiting for a sequence"
        running = "Requests holding a sequence (prefill or decode)"
        yield _gauge("vllm:num_requests_waiting", waiting, pool.waiting)
        yield _gauge("vllm:num_requests_running", running, pool.running)
        usage = "KV cells that running requests hold over all cells, a fraction 0-1 (as vLLM's)"
        yield _gauge("vllm:kv_cache_usage_perc", usage, pool.kv_usage)
        yield _gauge("vllm:gpu_cache_usage_perc", usage + "; vLLM's older name", pool.kv_usage)
        # The prefix scorer sizes its blocks and its per-pod LRU from these labels; a block is
        # the 64-token unit this server's own cache-aware routing hashes too.
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "KV cache configuration: tokens per block, blocks over every worker",
            labels=["block_size", "num_gpu_blocks"],
        )
        info.add_metric([str(BLOCK), str(pool.kv_cells // BLOCK)], 1.0)
        yield info
        yield _gauge("llamacpp:requests_processing", running + " (llama-server's name)", pool.running)
        yield _gauge("llamacpp:requests_deferred", waiting + " (llama-server's name)", pool.waiting)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
