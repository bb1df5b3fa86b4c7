"""The worker's event loop stays free while its model generates in the native thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from tests.integration.server import Server

LONG = {"prompt": "1, 2, 3, 4,", "max_tokens": 400, "temperature": 0, "stream": True}


def stream_in_background(url: str, body: dict) -> tuple[threading.Thread, dict[str, float | str]]:
    """Run a streamed completion in a thread; record when its first and last events came."""
    record: dict[str, float | str] = {}

    def run() -> None:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    record.setdefault("first", time.monotonic())
                    record["finish"] = line
            record["last"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, record


def test_cheap_requests_answer_while_the_model_generates(start_server: Callable[..., Server]) -> None:
    # A 2 s liveness timeout: were llama.cpp on the hub, gunicorn would kill the worker.
    server = start_server(LLM_WORKER_TIMEOUT="2", LLM_N_THREADS="1")
    thread, record = stream_in_background(server.url, LONG)
    while "first" not in record and thread.is_alive():
        time.sleep(0.01)
    answered = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for _ in range(5):
            assert client.get("/health").status_code == 200
            assert client.get("/v1/models").status_code == 200
            assert client.post("/v1/chat/completions", json={"messages": []}).status_code == 400
            assert client.post("/v1/completions", json={"prompt": "x", "model": "nope"}).status_code == 404
            answered.append(time.monotonic())
            time.sleep(0.3)
    thread.join(timeout=120)
    # Every cheap request was answered while the stream was still producing tokens.
    assert answered[-1] < record["last"], (answered, record)
    assert '"finish_reason":"length"' in str(record["finish"])
    assert record["last"] - record["first"] > 3  # longer than the 2 s liveness timeout
    assert "WORKER TIMEOUT" not in server.output()
    assert server.process.poll() is None
