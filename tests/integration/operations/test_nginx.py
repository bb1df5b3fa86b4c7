"""deploy/nginx.conf in front of two real backends: streaming, spreading, aborts, keep-alives."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from harness.servers import Server, Service, nginx
from tests.integration.conftest import assert_clean
from tests.support.busy import model_busy
from tests.support.rawhttp import open_request, read_chunk, read_head
from tests.support.waits import wait_until

pytestmark = pytest.mark.external

LONG = {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True}


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[Service, list[Server]]]:
    backends = [Server(LLM_N_THREADS="1", LLM_PARALLEL="1", LLM_SSE_KEEPALIVE="0.5") for _ in range(2)]
    proxy = None
    try:
        for backend in backends:
            backend.wait_ready()
        proxy = nginx([b.port for b in backends])
        yield proxy, backends
    finally:
        if proxy:
            proxy.stop()
        logs = [b.output() for b in backends]
        for backend in backends:
            backend.stop()
    for log in logs:
        assert_clean(log)


def test_stream_arrives_incrementally_through_nginx(deployment: tuple[Service, list[Server]]) -> None:
    proxy, _ = deployment
    arrivals = []
    body = {"prompt": "1, 2, 3,", "max_tokens": 100, "temperature": 0, "stream": True}
    with httpx.stream("POST", proxy.url + "/v1/completions", json=body, timeout=60) as response:
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic())
    assert len(arrivals) > 50
    # A hundred tokens take about a second; buffered, they would all arrive at once.
    assert arrivals[-1] - arrivals[0] > 0.5
    assert arrivals[len(arrivals) // 2] - arrivals[0] > 0.2


def test_ollama_ndjson_arrives_line_by_line_through_nginx(deployment: tuple[Service, list[Server]]) -> None:
    proxy, _ = deployment
    arrivals = []
    body = {"model": "SmolLM2-135M-Instruct.Q4_1", "prompt": "1, 2, 3,", "raw": True,
            "options": {"num_predict": 100, "temperature": 0}}  # fmt: skip
    with httpx.stream("POST", proxy.url + "/api/generate", json=body, timeout=60) as response:
        assert response.headers["content-type"] == "application/x-ndjson"
        for line in response.iter_lines():
            assert json.loads(line)  # one whole object a line, as the backend wrote it
            arrivals.append(time.monotonic())
    assert len(arrivals) > 50
    assert arrivals[-1] - arrivals[0] > 0.5  # unbuffered: the lines came as they were made


def test_requests_are_spread_over_both_backends(deployment: tuple[Service, list[Server]]) -> None:
    proxy, backends = deployment
    marker = f"spread-{time.monotonic_ns()}"
    body = {"prompt": "Hi", "max_tokens": 60, "temperature": 0, "stream": True}

    def one(index: int) -> None:
        headers = {"X-Request-ID": f"{marker}-{index}"}
        with httpx.stream("POST", proxy.url + "/v1/completions", json=body, headers=headers, timeout=60) as r:
            assert r.status_code == 200 and r.headers["x-request-id"] == f"{marker}-{index}"
            r.read()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    def access_lines() -> list[int]:
        """Per backend, this test's access lines (each written once its stream has ended)."""
        return [
            sum(1 for line in b.output().splitlines() if f"[{marker}-" in line and "app.access" in line)
            for b in backends
        ]

    wait_until(lambda: sum(access_lines()) == 4, what="four access lines")
    served = access_lines()
    assert all(count > 0 for count in served), served


def test_client_abort_through_nginx_cancels_the_backend(deployment: tuple[Service, list[Server]]) -> None:
    proxy, backends = deployment
    before = sum(b.output().count("cancelled by its client after") for b in backends)
    sock = open_request(proxy.port, "POST", "/v1/completions", LONG)
    reader = sock.makefile("rb")
    assert read_head(reader)[0] == 200
    for _ in range(5):
        read_chunk(reader)
    sock.shutdown(socket.SHUT_RDWR)
    reader.close()
    sock.close()
    wait_until(
        lambda: sum(b.output().count("cancelled by its client after") for b in backends) > before,
        what="the backend cancelling",
    )


def test_keepalive_comments_pass_through_nginx(deployment: tuple[Service, list[Server]]) -> None:
    proxy, backends = deployment
    with model_busy(backends[0].port), model_busy(backends[1].port):
        sock = open_request(proxy.port, "POST", "/v1/completions", {**LONG, "max_tokens": 5})
        with sock, sock.makefile("rb") as reader:
            assert read_head(reader)[0] == 200
            frames = [read_chunk(reader) for _ in range(2)]
    assert frames == [b": keep-alive\n\n"] * 2


def test_each_route_takes_through_nginx_what_the_app_takes(deployment: tuple[Service, list[Server]]) -> None:
    """deploy/nginx.conf's body limits are the app's, route by route: a 150 MiB file reaches
    /v1/files (LLM_MAX_FILE_BYTES, 200 MiB), a 15 MiB clip the transcriptions (LLM_MAX_MEDIA_BYTES,
    20 MiB), and a 2 MiB chat request is refused (LLM_MAX_BODY_BYTES, 1 MiB) by nginx in the API's
    error shape."""
    proxy, _ = deployment
    size = 150 * 1024 * 1024
    content = b'{"n": 1}\n' * (size // 9) + b"\n" * (size % 9)
    stored = httpx.post(
        proxy.url + "/v1/files",
        files={"file": ("big.jsonl", content, "application/jsonl")},
        data={"purpose": "user_data"},
        timeout=300,
    )
    assert stored.status_code == 200, stored.text
    assert stored.json()["bytes"] == size
    # A 15 MiB clip (within LLM_MAX_MEDIA_BYTES) reaches the app, which answers it itself: this
    # model has no audio encoder, which the app says in its own words, not nginx's 413.
    clip = httpx.post(
        proxy.url + "/v1/audio/transcriptions",
        files={"file": ("talk.wav", b"\0" * (15 * 1024 * 1024), "audio/wav")},
        data={"model": "whisper-1"},
        timeout=120,
    )
    assert clip.status_code not in (413, 502) and "error" in clip.json(), clip.text
    too_big = {"messages": [{"role": "user", "content": "x" * (2 * 1024 * 1024)}], "max_tokens": 1}
    refused = httpx.post(proxy.url + "/v1/chat/completions", json=too_big, timeout=60)
    assert refused.status_code == 413
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["error"]["code"] == "request_too_large"
