"""Requests racing sleep, wake, unload and load on the real server, in a bounded loop (slow tier).

llama-server's sleep race was a use-after-free (CVE-2026-43631): a request landing as the
model went to sleep. Here clients chat (whole answers and streams, some hanging up midway)
with a start-up model and an on-demand one while other threads put the start-up model to
sleep and wake it, level 1 and 2, and unload and load the on-demand one, for a fixed time.
Every request gets an answer or a clear error in its protocol's shape; no worker crashes; no
sequence stays held; both models answer afterwards.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support.security import LEAKS

pytestmark = pytest.mark.slow

SECONDS = 25.0
MODELS = [
    {"id": "pinned", "path": default_model_path(), "workers": 1, "n_ctx": 1024, "parallel": 2},
    {"id": "od", "path": default_model_path(), "load": "on_demand", "n_ctx": 1024, "parallel": 2},
]
CLEAR = {200, 400, 404, 409, 429, 499, 503}  # 409: a model busy refuses to sleep; 503: not ready yet


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving_models(MODELS, answers=4, LLM_QUEUE_TIMEOUT="20", LLM_SSE_KEEPALIVE="1") as instance:
        yield instance


def test_requests_racing_sleep_wake_unload_and_load_all_get_an_answer(server: Server) -> None:
    seen: Counter[tuple[str, int]] = Counter()
    problems: list[str] = []
    stop = time.monotonic() + SECONDS

    def record(what: str, answer: httpx.Response) -> None:
        seen[(what, answer.status_code)] += 1
        if answer.status_code not in CLEAR or (answer.status_code >= 400 and LEAKS.search(answer.text)):
            problems.append(f"{what}: {answer.status_code} {answer.text[:200]}")

    def chat(seed: int) -> None:
        draw = random.Random(seed)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            while time.monotonic() < stop:
                model = draw.choice(["pinned", "od"])
                body = {"model": model, "messages": [{"role": "user", "content": "Count: 1, 2,"}],
                        "max_tokens": draw.choice([1, 8, 40]), "temperature": 0}  # fmt: skip
                try:
                    if draw.random() < 0.5:
                        record(f"chat {model}", client.post("/v1/chat/completions", json=body))
                        continue
                    with client.stream(
                        "POST", "/v1/chat/completions", json={**body, "stream": True}
                    ) as answer:
                        for number, _ in enumerate(answer.iter_lines()):
                            if number == 3 and draw.random() < 0.3:
                                break  # the client hangs up midway
                        seen[(f"stream {model}", answer.status_code)] += 1
                        if answer.status_code not in CLEAR:
                            problems.append(f"stream {model}: {answer.status_code}")
                except httpx.HTTPError as failed:
                    problems.append(f"chat {model}: {type(failed).__name__}: {failed}")

    def operator(paths: list[tuple[str, dict[str, str] | None, dict[str, str] | None]]) -> None:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            while time.monotonic() < stop:
                for path, params, body in paths:
                    try:
                        record(path, client.post(path, params=params, json=body))
                    except httpx.HTTPError as failed:
                        problems.append(f"{path}: {type(failed).__name__}: {failed}")
                    time.sleep(0.3)

    threads = [threading.Thread(target=chat, args=(seed,)) for seed in range(4)]
    sleeping = [("/sleep", {"level": "1"}, None), ("/wake_up", None, None), ("/sleep", {"level": "2"}, None),
                ("/wake_up", None, None)]  # fmt: skip
    unloading = [("/models/unload", None, {"model": "od"}), ("/models/load", None, {"model": "od"})]
    threads += [
        threading.Thread(target=operator, args=(sleeping,)),
        threading.Thread(target=operator, args=(unloading,)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SECONDS + 180)
        assert not thread.is_alive()
    assert not problems, problems[:10]
    assert (
        sum(n for (what, status), n in seen.items() if what.startswith(("chat", "stream")) and status == 200)
        > 20
    )
    assert seen[("/sleep", 200)] and seen[("/models/unload", 200)], seen  # the races did happen
    with httpx.Client(base_url=server.url, timeout=120) as client:
        client.post("/wake_up")
        for model in ("pinned", "od"):
            body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
            after = client.post("/v1/chat/completions", json=body)
            assert after.status_code == 200, after.text
        busy = [
            slot for slot in client.get("/slots", params={"model": "pinned"}).json() if slot["is_processing"]
        ]
        assert not busy  # every sequence given back
    assert server.output().count("Booting worker") == 2  # no worker crashed and came back
    print(f"\nraces: {dict(seen)}")
