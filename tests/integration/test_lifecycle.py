"""Limits, busy workers, graceful shutdown and reload, and crash recovery, on the real server."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from tests.integration.busy import model_busy
from tests.integration.procs import worker_holding, worker_pids
from tests.integration.rawhttp import fetch, open_request, read_chunk, read_head
from tests.integration.server import Server

LONG = {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True}
SHORT = {"prompt": "1, 2, 3,", "max_tokens": 150, "temperature": 0, "stream": True}


def read_stream(sock: socket.socket) -> list[bytes]:
    """Every chunk until the end of the chunked body (or the connection); closes the socket."""
    with sock, sock.makefile("rb") as reader:
        status, _ = read_head(reader)
        assert status == 200
        chunks = []
        try:
            while (chunk := read_chunk(reader)) is not None:
                chunks.append(chunk)
        except (OSError, ValueError):
            chunks.append(b"<connection lost>")
    return chunks


def finish_reason(chunks: list[bytes]) -> str | None:
    events = [json.loads(c[6:]) for c in chunks if c.startswith(b"data: {")]
    return events[-1]["choices"][0]["finish_reason"] if events else None


def test_generation_wall_time_limit_ends_with_length(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_MAX_GENERATION_SECONDS="1")
    started = time.monotonic()
    body = httpx.post(server.url + "/v1/completions", json={**LONG, "stream": False}, timeout=60).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert 0 < body["usage"]["completion_tokens"] < 1500
    assert time.monotonic() - started < 10  # 1500 tokens would take ~15 s


def test_cheap_requests_answer_while_every_worker_generates(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1")
    with model_busy(server.port) as first, model_busy(server.port) as second:
        with httpx.Client(base_url=server.url, timeout=5) as client:
            for _ in range(10):  # fresh connections reach both workers
                assert httpx.get(server.url + "/health", timeout=5).status_code == 200
                assert client.get("/v1/models").status_code == 200
                assert client.post("/v1/completions", json={"prompt": 1}).status_code == 400
        assert not first.is_set() and not second.is_set()  # both still generating


def test_sigterm_lets_streams_finish_and_refuses_new_connections(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_GRACEFUL_TIMEOUT="30")
    sock = open_request(server.port, "POST", "/v1/completions", SHORT)
    time.sleep(0.3)  # the stream is under way
    os.kill(server.process.pid, signal.SIGTERM)
    time.sleep(0.5)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    chunks = read_stream(sock)
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    assert server.process.wait(timeout=30) == 0


def test_sighup_reload_fails_no_in_flight_request(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1")
    old_workers = set(worker_pids(server.process.pid))
    streams = [open_request(server.port, "POST", "/v1/completions", SHORT) for _ in range(2)]
    time.sleep(0.3)
    os.kill(server.process.pid, signal.SIGHUP)
    for sock in streams:
        chunks = read_stream(sock)
        assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    deadline = time.monotonic() + 30
    while old_workers & set(worker_pids(server.process.pid)):  # old workers leave once idle
        assert time.monotonic() < deadline, "old workers did not exit after the reload"
        time.sleep(0.1)
    server.wait_ready()
    assert fetch(server.port, "POST", "/v1/completions", {**SHORT, "max_tokens": 2}).status == 200


def test_worker_killed_mid_stream(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1")
    doomed = open_request(server.port, "POST", "/v1/completions", LONG)
    reader = doomed.makefile("rb")
    read_head(reader)
    read_chunk(reader)
    victim = worker_holding(server.process.pid, doomed)
    assert victim is not None
    # A second stream whose connection another worker accepted (retry until one does).
    for _ in range(50):
        survivor = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        time.sleep(0.05)
        if worker_holding(server.process.pid, survivor) not in (None, victim):
            break
        survivor.close()
    else:
        pytest.fail("every connection landed on the same worker")
    survivor.sendall(open_request_bytes(server.port, SHORT))
    time.sleep(0.3)
    os.kill(victim, signal.SIGKILL)
    # The killed worker's client sees its connection end, not a hang.
    doomed.settimeout(10)
    with pytest.raises((ValueError, ConnectionError)):  # EOF mid-chunk or a reset, not a timeout
        while read_chunk(reader) is not None:
            pass
    reader.close()
    doomed.close()
    # The other stream carries on to the end.
    chunks = read_stream(survivor)
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    # gunicorn starts a new worker, which loads the model; the server answers again.
    deadline = time.monotonic() + 30
    while victim in worker_pids(server.process.pid) or len(worker_pids(server.process.pid)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    server.wait_ready(timeout=30)
    assert (
        fetch(server.port, "POST", "/v1/completions", {**SHORT, "max_tokens": 2, "stream": False}).status
        == 200
    )


def open_request_bytes(port: int, body: dict) -> bytes:
    from tests.integration.rawhttp import request_bytes

    return request_bytes(port, "POST", "/v1/completions", body)
