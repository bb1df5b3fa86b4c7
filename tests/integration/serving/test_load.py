"""A small run of the load tool, as a user runs it: no 5xx, no hang, and no generation slot leaked."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import pytest

from harness.servers import ROOT, Server

PROBE = {"prompt": "Hello", "max_tokens": 5, "temperature": 0}


def idle_latency(server: Server, samples: int = 4) -> float:
    """The slowest of a few small requests on fresh connections (so every worker is probed)."""
    slowest = 0.0
    for _ in range(samples):
        started = time.monotonic()
        assert httpx.post(server.url + "/v1/completions", json=PROBE, timeout=60).status_code == 200
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def load_tool(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.load` with `args`, from the checkout."""
    command = [sys.executable, "-m", "bench.load", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_load_tool_small_run(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_MAX_QUEUE="2", LLM_QUEUE_TIMEOUT="20")
    before = idle_latency(server)
    ran = load_tool(
        "--url", server.url, "--clients", "6", "--requests", "24", "--max-tokens", "40",
        "--disconnect-fraction", "0.3", "--time-limit", "120", "--seed", "1",
    )  # fmt: skip
    summary = json.loads(ran.stdout)
    assert ran.returncode == 0, (summary, ran.stderr)
    assert summary["hung"] == 0 and summary["failed"] == 0, summary
    assert summary["completed"] + summary["disconnected"] + summary["rejected"] == 24, summary
    assert summary["completed"] > 0 and summary["disconnected"] > 0, summary
    assert set(summary["statuses"]) <= {"200", "429", "503"}, summary
    assert summary["ttft_p50"] is not None
    # Afterwards the server is as quick as before: nothing holds a slot or a queue place.
    after = idle_latency(server)
    assert after < 3 * before + 0.5, (before, after)


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://192.168.1.1", "http://8.8.8.8"])
def test_load_tool_refuses_non_loopback_targets(url: str) -> None:
    ran = load_tool("--url", url, "--requests", "1")
    assert ran.returncode != 0 and "loopback addresses only" in ran.stderr, ran.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "localhost"])
def test_load_tool_accepts_loopback_targets(host: str) -> None:
    # Nothing listens on port 1: the run is made (and fails to connect), not refused.
    ran = load_tool("--url", f"http://{host}:1", "--requests", "1", "--time-limit", "10")
    assert "loopback addresses only" not in ran.stderr
    assert json.loads(ran.stdout)["failed"] == 1, ran.stdout
