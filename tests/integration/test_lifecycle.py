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

from tests.support.busy import model_busy
from tests.support.procs import worker_holding, worker_pids
from tests.support.rawhttp import fetch, open_request, read_chunk, read_head, request_bytes
from tests.support.servers import Server
from tests.support.waits import wait_until

LONG = {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True}
SHORT = {"prompt": "1, 2, 3,", "max_tokens": 150, "temperature": 0, "stream": True}


class RawStream:
    """A streamed request on a raw socket, read at the test's pace: first its start, later the rest."""

    def __init__(self, port: int, body: dict, sock: socket.socket | None = None) -> None:
        self.sock = sock or open_request(port, "POST", "/v1/completions", body)
        self.reader = self.sock.makefile("rb")
        self.chunks: list[bytes] = []

    def started(self) -> RawStream:
        """Once the 200 and the first generated event have arrived: the stream is under way."""
        status, _ = read_head(self.reader)
        assert status == 200
        while not (self.chunks and self.chunks[-1].startswith(b"data: {")):
            chunk = read_chunk(self.reader)
            assert chunk is not None, self.chunks
            self.chunks.append(chunk)
        return self

    def rest(self) -> list[bytes]:
        """Every chunk until the end of the body (or of the connection); closes the socket."""
        try:
            while (chunk := read_chunk(self.reader)) is not None:
                self.chunks.append(chunk)
        except (OSError, ValueError):
            self.chunks.append(b"<connection lost>")
        self.reader.close()
        self.sock.close()
        return self.chunks


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
    stream = RawStream(server.port, SHORT).started()
    os.kill(server.process.pid, signal.SIGTERM)
    wait_until(lambda: refuses_connections(server.port), what="the listener closing")
    chunks = stream.rest()
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    assert server.process.wait(timeout=30) == 0


def test_sighup_reload_fails_no_in_flight_request(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1")
    old_workers = set(worker_pids(server.process.pid))
    streams = [RawStream(server.port, SHORT).started() for _ in range(2)]
    os.kill(server.process.pid, signal.SIGHUP)
    for stream in streams:
        chunks = stream.rest()
        assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    # Old workers leave once idle.
    wait_until(lambda: not old_workers & set(worker_pids(server.process.pid)), 30, "the old workers' exit")
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
        holder = wait_until(
            lambda sock=survivor: worker_holding(server.process.pid, sock), what="an accepted connection"
        )
        if holder != victim:
            break
        survivor.close()
    else:
        pytest.fail("every connection landed on the same worker")
    survivor.sendall(request_bytes(server.port, "POST", "/v1/completions", SHORT))
    surviving = RawStream(server.port, SHORT, sock=survivor).started()
    os.kill(victim, signal.SIGKILL)
    # The killed worker's client sees its connection end, not a hang.
    doomed.settimeout(10)
    with pytest.raises((ValueError, ConnectionError)):  # EOF mid-chunk or a reset, not a timeout
        while read_chunk(reader) is not None:
            pass
    reader.close()
    doomed.close()
    # The other stream carries on to the end.
    chunks = surviving.rest()
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    # gunicorn starts a new worker, which loads the model; the server answers again.
    wait_until(
        lambda: victim not in (pids := worker_pids(server.process.pid)) and len(pids) == 2, 30, "a new worker"
    )
    server.wait_ready(timeout=30)
    assert (
        fetch(server.port, "POST", "/v1/completions", {**SHORT, "max_tokens": 2, "stream": False}).status
        == 200
    )


def refuses_connections(port: int) -> bool:
    """True once nothing accepts connections on `port` any more."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False
