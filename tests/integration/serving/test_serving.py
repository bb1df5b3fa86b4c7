"""The worker's event loop stays free while its model generates in the native thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from harness.servers import Server
from tests.support.waits import wait_until

# Longer than any machine generates in the test's few seconds: the test hangs up when done.
LONG = {"prompt": "1, 2, 3, 4,", "max_tokens": 6000, "ignore_eos": True, "temperature": 0, "stream": True}


class BackgroundStream:
    """A streamed completion read in a thread, counting its events and noting when they came."""

    def __init__(self, url: str, body: dict) -> None:
        self.started = threading.Event()
        self.events = 0
        self.first = self.last = 0.0
        self.hang_up = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(url, body))
        self.thread.start()

    def _read(self, url: str, body: dict) -> None:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    self.events += 1
                    self.first = self.first or time.monotonic()
                    self.last = time.monotonic()
                    self.started.set()
                if self.hang_up.is_set():
                    return


def test_cheap_requests_answer_while_the_model_generates(start_server: Callable[..., Server]) -> None:
    # A 2 s liveness timeout: were llama.cpp on the hub, gunicorn would kill the worker.
    server = start_server(LLM_WORKER_TIMEOUT="2", LLM_N_THREADS="1", LLM_N_CTX="8192")
    stream = BackgroundStream(server.url, LONG)
    try:
        assert stream.started.wait(60)
        answered: list[int] = []
        with httpx.Client(base_url=server.url, timeout=30) as client:
            # Rounds of cheap requests until the stream has made real progress for longer than
            # the 2 s liveness timeout meanwhile, however fast this machine generates.
            while len(answered) < 5 or stream.events < 100 or stream.last - stream.first <= 3:
                assert client.get("/health").status_code == 200
                assert client.get("/v1/models").status_code == 200
                assert client.post("/v1/chat/completions", json={"messages": []}).status_code == 400
                assert (
                    client.post("/v1/completions", json={"prompt": "x", "model": "nope"}).status_code == 404
                )
                answered.append(time.monotonic())
                assert stream.thread.is_alive(), "the stream ended before the cheap requests were done"
        # Every cheap request was answered while the stream was still producing tokens.
        wait_until(lambda: stream.last > answered[-1], timeout=30, what="a token after the last cheap answer")
    finally:
        stream.hang_up.set()  # the client hangs up: its thread ends before the server stops
        stream.thread.join(timeout=60)
    assert "WORKER TIMEOUT" not in server.output()
    assert server.process.poll() is None
