"""Waiting on events (a log line, a condition) with a deadline, instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import httpx

from harness.servers import Service

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 10, what: str = "the condition") -> T:
    """Poll `check` until it returns something truthy, and return that; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout}s"
        time.sleep(0.02)
    return result


def wait_for_log(server: Service, text: str, timeout: float = 10, count: int = 1) -> str:
    """The server's log once `text` appears in it `count` times."""
    log = wait_until(
        lambda: (log := server.output()).count(text) >= count and log,
        timeout,
        f"{text!r} logged {count} time(s)",
    )
    assert isinstance(log, str)
    return log


def generations_in_flight(server: Service) -> float:
    """How many generations the server's workers are running now, read from /metrics."""
    for line in httpx.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("llm_generations_in_flight "):
            return float(line.split()[1])
    return 0.0
