"""A small run of the load tool: no 5xx, no hang, and no generation slot leaked afterwards."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from bench.load import run
from bench.services import Server

PROBE = {"prompt": "Hello", "max_tokens": 5, "temperature": 0}


def idle_latency(server: Server, samples: int = 4) -> float:
    """The slowest of a few small requests on fresh connections (so every worker is probed)."""
    slowest = 0.0
    for _ in range(samples):
        started = time.monotonic()
        assert httpx.post(server.url + "/v1/completions", json=PROBE, timeout=60).status_code == 200
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def test_load_tool_small_run(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_MAX_QUEUE="2", LLM_QUEUE_TIMEOUT="20")
    before = idle_latency(server)
    report = asyncio.run(
        run(
            server.url, clients=6, requests=24, max_tokens=40, disconnect_fraction=0.3, time_limit=120, seed=1
        )
    )
    summary = report.summary()
    assert report.hung == 0 and report.failed == 0, summary
    assert report.completed + report.disconnected + report.rejected == 24, summary
    assert report.completed > 0 and report.disconnected > 0, summary
    assert set(report.statuses) <= {"200", "429", "503"}, summary
    assert summary["ttft_p50"] is not None
    # Afterwards the server is as quick as before: nothing holds a slot or a queue place.
    after = idle_latency(server)
    assert after < 3 * before + 0.5, (before, after)
