"""Requests waiting for models that load on demand are served in arrival order.

llama-server's router test `test_router_queue_is_fifo`, on the real gunicorn: a pinned
worker and one on-demand pool worker, both accepting requests, so the waiting requests
are spread over two processes. Across models: the pool worker is busy, requests for two
other models queue, and the one that came first loads (and answers) first. Within one
model: six staggered streams for a model that is loading, with two sequences, start in
pairs in the order they came.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support.waits import wait_until

KEY = "key-order"
AUTH = {"Authorization": f"Bearer {KEY}"}
STAGGER = 0.3  # seconds between arrivals: the order is unambiguous, and far shorter than a load's wait


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    smol = default_model_path()
    models = [
        {"id": "pinned", "path": smol, "workers": 1, "n_ctx": 512, "parallel": 2},
        *({"id": name, "path": smol, "load": "on_demand", "n_ctx": 512} for name in ("od-a", "od-c", "od-d")),
        {"id": "od-b", "path": smol, "load": "on_demand", "n_ctx": 1024, "parallel": 2},
    ]
    # Each model is the same small GGUF under another id: a swap costs about a second (the idle
    # model must settle first), so the waits are short; the queue timeout leaves room for all.
    with serving_models(models, LLM_ADMIN_KEYS=KEY, LLM_QUEUE_TIMEOUT="60") as server:
        yield server


def unload_all(server: Server) -> None:
    for model in ("od-a", "od-b", "od-c", "od-d"):
        wait_until(lambda model=model: order(server, "unload", model).status_code == 200, 30)


def order(server: Server, verb: str, model: str) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{verb}", json={"model": model}, headers=AUTH, timeout=60)


def request(model: str, tokens: int, stream: bool = False) -> dict[str, object]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Count to a thousand."}],
        "max_tokens": tokens,
        "min_tokens": tokens,  # the answer's length does not depend on the model's mood
        "stream": stream,
    }


def test_requests_for_models_waiting_on_a_busy_pool_worker_load_in_arrival_order(server: Server) -> None:
    unload_all(server)
    assert order(server, "load", "od-a").status_code == 200
    done: dict[str, float] = {}
    failed: list[str] = []
    generating = threading.Event()

    def ask(model: str, tokens: int) -> None:
        with (
            httpx.Client(timeout=120) as client,  # its own connection: any worker may accept it
            client.stream(
                "POST", f"{server.url}/v1/chat/completions", json=request(model, tokens, True), headers=AUTH
            ) as answer,
        ):
            for line in answer.iter_lines():
                if line.startswith("data:"):
                    generating.set()
                if line.startswith("data:") and '"error"' in line:
                    failed.append(f"{model}: {line[:200]}")
            if answer.status_code != 200:
                failed.append(f"{model}: {answer.status_code}")
        done[model] = time.monotonic()

    busy = threading.Thread(target=ask, args=("od-a", 200))  # the one pool worker serves od-a meanwhile
    busy.start()
    assert generating.wait(30)
    queued = [threading.Thread(target=ask, args=(model, 1)) for model in ("od-b", "od-c", "od-d")]
    for thread in queued:
        thread.start()
        time.sleep(STAGGER)
    assert "od-a" not in done, "the busy request ended before the others queued: make it longer"
    for thread in (busy, *queued):
        thread.join(120)
    assert not failed, failed
    assert sorted(done, key=done.__getitem__) == ["od-a", "od-b", "od-c", "od-d"], done


def test_streams_waiting_for_a_loading_model_start_in_arrival_order(server: Server) -> None:
    unload_all(server)
    started: dict[int, float] = {}
    failed: list[str] = []

    def stream(number: int) -> None:
        with (
            httpx.Client(timeout=120) as client,
            client.stream(
                "POST",
                f"{server.url}/v1/chat/completions",
                json=request("od-b", 48, stream=True),
                headers=AUTH,
            ) as answer,
        ):
            for line in answer.iter_lines():
                if '"content":"' in line and number not in started:  # its first token
                    started[number] = time.monotonic()
                if line.startswith("data:") and '"error"' in line:
                    failed.append(f"{number}: {line[:200]}")
            if answer.status_code != 200:
                failed.append(f"{number}: {answer.status_code}")

    threads = [threading.Thread(target=stream, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
        time.sleep(STAGGER / 3)  # all six arrive while od-b loads (or just after)
    for thread in threads:
        thread.join(120)
    assert not failed, failed
    starts = sorted(started, key=started.__getitem__)
    # Two sequences: the first two in, then the next two, then the last two (in either order within a pair).
    pairs = [sorted(starts[n : n + 2]) for n in range(0, 6, 2)]
    assert pairs == [[0, 1], [2, 3], [4, 5]], started
