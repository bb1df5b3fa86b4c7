"""The model server protocol's metrics (vLLM's names, llama-server's beside them): one series per instance.

The inference gateway's endpoint picker (llm-d router) scrapes each pod's /metrics
every 50 ms and scores pods by queue, running requests and KV-cache use, reading the
first series of each name it finds. Per-worker series would have it read one worker
only, so these are added up over every gunicorn worker at scrape time, from the
worker board in shared memory: fresh on every scrape, and cheap (no file per worker).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.engine.cache.prefix_blocks import BLOCK
from app.telemetry.worker_board import WorkerBoard


class ModelServerCollector(Collector):
    """Yields the protocol's gauges for the whole instance, read off `board` at each scrape."""

    def __init__(self, board: WorkerBoard, adapters: Mapping[int, Sequence[str]] | None = None) -> None:
        """`adapters`: each live worker's seat and its model's LoRA adapters, in order (the bits' names)."""
        self._board, self._adapters = board, adapters or {}

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
        if any(any(names) for names in self._adapters.values()):
            yield self._lora_info()

    def _lora_info(self) -> Metric:
        """vLLM's LoRA gauge: the adapters requests run and wait with over every worker, as labels; its
        value the time of the scrape (the picker reads the newest series). `max_lora`: the adapters a
        worker holds at once (all of its model's loaded adapters)."""
        running: set[str] = set()
        waiting: set[str] = set()
        for seat, names in self._adapters.items():
            run_bits, wait_bits = self._board.adapters(seat)
            running.update(name for n, name in enumerate(names) if run_bits >> n & 1)
            waiting.update(name for n, name in enumerate(names) if wait_bits >> n & 1)
        info = GaugeMetricFamily(
            "vllm:lora_requests_info",
            "LoRA adapters in use: running and waiting requests' adapters (vLLM's)",
            labels=["running_lora_adapters", "waiting_lora_adapters", "max_lora"],
        )
        most = max(sum(1 for name in names if name) for names in self._adapters.values())
        info.add_metric([",".join(sorted(running)), ",".join(sorted(waiting)), str(most)], time.time())
        return info


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
