"""The inference gateway's model server protocol on three pods on loopback (containers, or gunicorn).

A scraper reads each pod's /metrics as the endpoint picker does (tests/support/picker.py)
every 50 ms, its base tick, while one pod is loaded past its sequences; the figures
must rise there alone, agree with /health/workers, and fall back to rest. A pod sent
SIGTERM must report not-ready within a second while its streams finish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from harness.servers import Server
from tests.integration.conftest import assert_clean
from tests.support.containers import Container
from tests.support.picker import PodMetrics, read_first_series, scrape
from tests.support.pods import ProcessPod, start_pod
from tests.support.rawhttp import RawStream, fetch, finish_reason
from tests.support.waits import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the image for its pods

# Generates exactly max_tokens, so a stream holds its sequence for a known stretch.
BUSY = {"prompt": "Once upon a time", "max_tokens": 160, "ignore_eos": True, "temperature": 0}


Pod = Container | ProcessPod


@pytest.fixture(scope="module")
def pods() -> Iterator[list[Pod]]:
    """Three pods: the first with two workers (its figures are sums), two with one."""
    started = [
        start_pod(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_PARALLEL="2"),
        start_pod(LLM_WORKERS="1", LLM_N_THREADS="1", LLM_PARALLEL="2"),
        start_pod(LLM_WORKERS="1", LLM_N_THREADS="1", LLM_PARALLEL="2"),
    ]
    for pod in started:
        pod.wait_ready()
    yield started
    logs = [pod.output() for pod in started]
    for pod in started:
        pod.stop()
    for log in logs:
        assert_clean(log)


class Picker:
    """Scrapes every pod each 50 ms in the background, keeping what it read."""

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods
        self.seen: list[list[PodMetrics]] = [[] for _ in pods]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        clients = [httpx.Client() for _ in self.pods]
        try:
            while not self._stop.wait(0.05):
                for index, pod in enumerate(self.pods):
                    self.seen[index].append(scrape(pod.url, clients[index]))
        finally:
            for client in clients:
                client.close()

    def __enter__(self) -> Picker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def workers_sum(pod: Pod) -> tuple[int, int]:
    """Running and waiting choices over the pod's workers, from /health/workers."""
    listed = httpx.get(pod.url + "/health/workers", timeout=5).json()["data"]
    return sum(w["running"] for w in listed), sum(w["waiting"] for w in listed)


def test_cache_config_counts_every_workers_cells(pods: list[Pod]) -> None:
    for pod in pods:
        listed = httpx.get(pod.url + "/health/workers", timeout=5).json()["data"]
        cells = sum(w["kv_cache"]["cells"] for w in listed)
        at_rest = scrape(pod.url)
        assert at_rest == PodMetrics(0, 0, 0.0, 64, cells // 64)


def test_picker_sees_load_rise_on_the_loaded_pod_alone_and_fall_to_rest(pods: list[Pod]) -> None:
    loaded, sequences = pods[0], 4  # two workers of two sequences
    statuses: list[int] = []

    def post() -> None:
        statuses.append(httpx.post(loaded.url + "/v1/completions", json=BUSY, timeout=300).status_code)

    streams = [threading.Thread(target=post) for _ in range(sequences + 3)]
    with Picker(pods) as picker:
        for stream in streams:
            stream.start()
        try:
            # With every sequence busy and three requests queued, the counts hold still long
            # enough to compare the picker's reading with the workers' own. KV use is reported
            # after a worker's step, so a scrape between a sequence's dispatch and its first
            # step can still read 0: wait for the step, not for the dispatch alone.
            wait_until(lambda: workers_sum(loaded) == (sequences, 3), 30, "every sequence busy, three queued")
            agreed = wait_until(
                lambda: (m := scrape(loaded.url)).kv_usage and (m.running, m.waiting) == (sequences, 3) and m,
                10,
                "agreement, with the running sequences' cells counted",
            )
            assert 0 < agreed.kv_usage < 1
        finally:
            for stream in streams:
                stream.join()
        assert statuses == [200] * len(streams)
        wait_until(lambda: picker.seen[0] and picker.seen[0][-1].running == 0, 10, "the picker seeing rest")
    first = picker.seen[0]
    # The steady state: every sequence busy, three queued (for a moment at the start, more
    # may wait while the batcher hands out sequences, so no bound on the maximum here).
    assert any(m.running == sequences and m.waiting == 3 for m in first)
    assert max(m.running for m in first) == sequences
    assert max(m.kv_usage for m in first) > 0
    assert first[-1] == PodMetrics(0, 0, 0.0, first[-1].block_size, first[-1].num_blocks)
    for idle in picker.seen[1:]:  # the other pods were never loaded
        assert idle and all(m.running == m.waiting == 0 and m.kv_usage == 0 for m in idle)


def test_a_pod_sent_sigterm_is_not_ready_within_a_second_and_finishes_its_stream(pods: list[Pod]) -> None:
    pod = pods[2]
    stream = RawStream(pod.port, {**BUSY, "stream": True}).started()
    pod.terminate()
    told = time.monotonic()
    wait_until(lambda: fetch(pod.port, "GET", "/health/ready").status == 503, 5, "not ready")
    assert time.monotonic() - told < 1.0
    assert fetch(pod.port, "GET", "/health").status == 200  # alive: the kubelet does not restart it
    refused = fetch(pod.port, "POST", "/v1/completions", {**BUSY, "max_tokens": 1})
    assert refused.status == 503 and refused.header("connection") == "close"
    chunks = stream.rest()
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    assert pod.exit_code(timeout=30) == 0


def test_gauges_stay_fresh_while_counters_age_and_scrapes_write_no_access_lines(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(LLM_METRICS_MAX_AGE="600", LLM_N_THREADS="1")

    def completions_counted() -> float:
        families = read_first_series(httpx.get(server.url + "/metrics", timeout=5).text)
        lines = httpx.get(server.url + "/metrics", timeout=5).text.splitlines()
        assert families["vllm:num_requests_running"][0] == "gauge"
        return sum(float(line.split()[-1]) for line in lines if 'route="/v1/completions"' in line)

    before = completions_counted()
    stream = RawStream(server.port, {**BUSY, "stream": True}).started()
    assert scrape(server.url).running == 1  # read at this scrape
    chunks = stream.rest()
    assert finish_reason(chunks) == "length"
    wait_until(lambda: scrape(server.url).running == 0, 10, "the gauge back at rest")
    assert completions_counted() == before  # the reading made before the request, up to 600 s old
    log = server.output()
    assert "route=/v1/completions" in log
    quiet = [
        line
        for line in log.splitlines()
        if "route=/metrics" in line or "status=200" in line and "/health" in line
    ]
    assert not quiet  # counted, not logged (a 503 while loading is)
