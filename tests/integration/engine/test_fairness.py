"""With W workers, W concurrent streams all generate at once, on fresh and keep-alive connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
import pytest

from harness.servers import Server
from tests.support.busy import model_busy
from tests.support.rawhttp import open_request, read_chunk, read_head

BODY = {"prompt": "1, 2, 3,", "max_tokens": 40, "temperature": 0, "stream": True}


def timed_stream(client: httpx.Client, record: dict[str, float]) -> None:
    with client.stream("POST", "/v1/completions", json=BODY) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                record.setdefault("first", time.monotonic())
                record["last"] = time.monotonic()


def run_pair(clients: list[httpx.Client]) -> list[dict[str, float]]:
    records: list[dict[str, float]] = [{}, {}]
    threads = [
        threading.Thread(target=timed_stream, args=(c, r)) for c, r in zip(clients, records, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return records


def overlapped(records: list[dict[str, float]]) -> bool:
    """Both streams produced tokens before either finished: they generated at the same time."""
    return max(r["first"] for r in records) < min(r["last"] for r in records)


def test_two_workers_serve_two_streams_at_once(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_PARALLEL="1")
    # Fresh connections: each round, the kernel hands both to whichever worker accepts.
    for _ in range(3):
        clients = [httpx.Client(base_url=server.url, timeout=60) for _ in range(2)]
        records = run_pair(clients)
        for client in clients:
            client.close()
        assert overlapped(records), records
    # Keep-alive connections: once opened, each stays with its worker, perhaps the same one.
    for _ in range(2):
        clients = [httpx.Client(base_url=server.url, timeout=60) for _ in range(2)]
        for _ in range(2):
            assert overlapped(run_pair(clients))
        for client in clients:
            client.close()


def test_a_queued_request_moves_to_a_worker_that_frees_up(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_PARALLEL="1", LLM_SSE_KEEPALIVE="0.3")
    body = {"prompt": "Hi", "max_tokens": 5, "temperature": 0, "stream": True}
    # Where the queued request lands is the kernel's choice: try until it has landed, at
    # least once, on the worker that stays busy, so that it had to move.
    for _ in range(8):
        with model_busy(server.port) as stays_busy:
            with model_busy(server.port):  # both workers now generate
                sock = open_request(server.port, "POST", "/v1/completions", body)
                reader = sock.makefile("rb")
                assert read_head(reader)[0] == 200
                assert read_chunk(reader) == b": keep-alive\n\n"  # queued
            freed = time.monotonic()  # the inner stream hung up: one worker is idle now
            while (frame := read_chunk(reader)) == b": keep-alive\n\n":
                pass
            assert frame is not None and frame.startswith(b"data: {")
            # It starts at once on the idle worker, not after the other's long stream.
            assert time.monotonic() - freed < 5
            assert not stays_busy.is_set()
            reader.close()
            sock.close()
        if "queued request moved to worker slot" in server.output():
            return
    pytest.fail("the queued request never had to move (it always landed on the freed worker)")
