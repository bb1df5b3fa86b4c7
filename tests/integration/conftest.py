"""Fixtures that run the real server: gunicorn, gevent workers, the default model."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from bench.services import Server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One shared server with a single worker and a short keep-alive interval."""
    instance = Server(LLM_WORKERS="1", LLM_N_THREADS="2", LLM_SSE_KEEPALIVE="1").wait_ready()
    yield instance
    log = instance.output()
    instance.stop()
    assert_clean(log)


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start servers with custom settings; all are stopped after the test."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        instance = Server(**env)
        started.append(instance)
        return instance.wait_ready()

    yield start
    logs = [instance.output() for instance in started]
    for instance in started:
        instance.stop()
    for log in logs:
        assert_clean(log)


def assert_clean(log: str) -> None:
    """Nothing a client did may show up as an error: hang-ups are logged as cancellations.

    A worker killed on purpose by a test is the one error gunicorn may report.
    """
    lines = [line for line in log.splitlines() if "was sent SIGKILL" not in line]
    assert not [line for line in lines if "Traceback" in line or "[ERROR]" in line], log
