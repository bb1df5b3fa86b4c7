"""Limits, busy workers, graceful shutdown and reload, and crash recovery, on the real server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.settings.config import Config
from harness.servers import Server
from tests.support.busy import model_busy
from tests.support.procs import worker_holding, worker_pids
from tests.support.rawhttp import (
    RawStream,
    fetch,
    finish_reason,
    open_request,
    read_chunk,
    read_head,
    request_bytes,
)
from tests.support.waits import wait_for_log, wait_until

LONG = {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True}
SHORT = {"prompt": "1, 2, 3,", "max_tokens": 150, "temperature": 0, "stream": True}


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


def test_sigterm_drains_stays_alive_then_exits_without_waiting_for_idle_connections(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_GRACEFUL_TIMEOUT="120")
    idle = socket.create_connection(("127.0.0.1", server.port))  # a proxy's pooled keep-alive connection
    idle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    idle_reader = idle.makefile("rb")
    assert read_head(idle_reader)[0] == 200
    stream = RawStream(server.port, SHORT).started()
    os.kill(server.process.pid, signal.SIGTERM)
    wait_until(lambda: fetch(server.port, "GET", "/health/ready").status == 503, what="not ready")
    assert fetch(server.port, "GET", "/health").status == 200
    refused = fetch(
        server.port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}
    )
    assert refused.status == 503 and refused.header("retry-after") == "1"
    assert json.loads(refused.body)["error"]["type"] == "service_unavailable"
    chunks = stream.rest()
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    ended = time.monotonic()
    # The idle connection is closed at stop, so it does not hold the workers for the grace.
    assert server.process.wait(timeout=60) == 0
    assert time.monotonic() - ended < 30
    idle.settimeout(5)
    assert idle_reader.read() == b'{"status":"ok"}\n'  # the rest of its answer, then the end: closed
    idle_reader.close()
    idle.close()
    assert refuses_connections(server.port)
    assert "drained: no request is generating" in server.output()


def test_a_connection_whose_request_comes_after_its_worker_is_told_to_stop_is_answered(
    start_server: Callable[..., Server],
) -> None:
    # A reload stops the old worker at once: a client may have connected to it and not sent yet.
    server = start_server(LLM_WORKERS="1", LLM_N_THREADS="1")
    fresh = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    old = wait_until(lambda: worker_holding(server.process.pid, fresh), 30, "the connection accepted")
    os.kill(server.process.pid, signal.SIGHUP)
    wait_for_log(server, f"worker {old} stopping: 0 answering, 0 idle closed, 1 not yet sent", timeout=30)
    fresh.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive, as far as the client goes
    reader = fresh.makefile("rb")
    status, headers = read_head(reader)
    assert status == 200 and ("connection", "close") in headers  # answered, then closed: it stops
    assert reader.read() == b'{"status":"ok"}\n'
    reader.close()
    fresh.close()
    wait_until(lambda: old not in worker_pids(server.process.pid), 30, "the old worker's exit")


def test_drain_ends_at_the_graceful_timeout_when_a_stream_outlasts_it(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(LLM_GRACEFUL_TIMEOUT="2")
    stream = RawStream(server.port, {**LONG, "ignore_eos": True}).started()
    os.kill(server.process.pid, signal.SIGTERM)
    told = time.monotonic()
    assert server.process.wait(timeout=30) == 0
    assert time.monotonic() - told < 15  # the grace, not a second one for the workers
    assert stream.rest()[-1] == b"<connection lost>" or finish_reason(stream.chunks) is None
    assert "still generating after 2s" in server.output()


def test_sighup_with_a_bad_setting_keeps_the_running_workers(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    shutil.copyfile(Config.from_env().model_path, model)
    server = Server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_MODEL_PATH=str(model)).wait_ready()
    try:
        workers = set(worker_pids(server.process.pid))
        broken = tmp_path / "broken"
        broken.write_bytes(b"not a model")
        os.replace(model, tmp_path / "good.gguf")  # the running workers keep the file they mapped
        os.replace(broken, model)
        os.kill(server.process.pid, signal.SIGHUP)
        wait_for_log(server, "configuration error on reload, the workers carry on as they were")
        assert server.process.poll() is None and set(worker_pids(server.process.pid)) == workers
        assert fetch(server.port, "POST", "/v1/completions", {**SHORT, "stream": False}).status == 200
        # Once the file is right again, a SIGHUP reloads as usual.
        os.replace(tmp_path / "good.gguf", model)
        os.kill(server.process.pid, signal.SIGHUP)
        wait_until(lambda: not workers & set(worker_pids(server.process.pid)), 30, "new workers")
        server.wait_ready()
        assert fetch(server.port, "POST", "/v1/completions", {**SHORT, "stream": False}).status == 200
    finally:
        log = server.output()
        server.stop(wait=False)
    errors = [line for line in log.splitlines() if "[ERROR]" in line or "Traceback" in line]
    assert len(errors) == 1 and "is not a GGUF model file" in errors[0], log


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
