"""Named API keys and their limits on a real two-worker server: shared by the workers, in OpenAI's headers."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from pathlib import Path

import httpx
import openai
import pytest

from harness.servers import Server
from tests.support.busy import model_busy
from tests.support.procs import connection_to_each_worker
from tests.support.prometheus import scrape, value
from tests.support.waits import wait_for_log, wait_until

KEYS = """# name key [limits]
conc sk-conc-7d1 concurrency=1
rpm sk-rpm-2c4 rpm=4
tpm sk-tpm-9e0 tpm=60
free sk-free-5a8
"""
SECRETS = ("sk-conc-7d1", "sk-rpm-2c4", "sk-tpm-9e0", "sk-free-5a8")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def complete(server: Server, key: str, max_tokens: int = 1, **extra: object) -> httpx.Response:
    """One completion on a fresh connection (so the kernel spreads them over the workers)."""
    body = {"prompt": "Say something:", "max_tokens": max_tokens, "temperature": 0, **extra}
    return httpx.post(server.url + "/v1/completions", json=body, headers=auth(key), timeout=60)


@pytest.fixture
def limited(start_server: Callable[..., Server], tmp_path: Path) -> Iterator[Server]:
    keys = tmp_path / "keys"
    keys.write_text(KEYS)
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_API_KEYS_FILE=str(keys))
    yield server
    assert not any(secret in server.output() for secret in SECRETS)  # names are logged, keys never


@contextmanager
def each_worker(server: Server) -> Iterator[list[HTTPConnection]]:
    """A kept-alive connection to each of the two workers, closed after the block."""
    held = connection_to_each_worker("127.0.0.1", server.port, server.process.pid, 2)
    try:
        yield list(held.values())
    finally:
        for connection in held.values():
            connection.close()


def post(connection: HTTPConnection, key: str) -> tuple[int, dict[str, str], dict]:
    """One short completion over `connection`: status, headers (lower-case), body."""
    body = json.dumps({"prompt": "Say something:", "max_tokens": 1, "temperature": 0})
    connection.request("POST", "/v1/completions", body, {**auth(key), "Content-Type": "application/json"})
    answer = connection.getresponse()
    return answer.status, {k.lower(): v for k, v in answer.getheaders()}, json.loads(answer.read())


def test_concurrency_holds_across_workers_and_never_delays_other_keys(limited: Server) -> None:
    with each_worker(limited) as workers, model_busy(limited.port, headers=auth("sk-conc-7d1")):
        for connection in workers:  # refused on both: the one holding the stream and the other
            status, headers, body = post(connection, "sk-conc-7d1")
            error = body["error"]
            assert status == 429 and error["code"] == "rate_limit_exceeded", error
            assert error["type"] == "rate_limit_error"
            assert "'conc'" in error["message"] and "1 generations at once" in error["message"]
            assert headers["retry-after"] == "1"
            assert post(connection, "sk-free-5a8")[0] == 200  # another key goes straight through
    # The stream's place comes back when it ends (its client hung up).
    wait_until(lambda: complete(limited, "sk-conc-7d1").status_code == 200, 30, "conc admitted again")


def test_requests_per_minute_across_workers_with_openai_headers(limited: Server) -> None:
    with each_worker(limited) as (first, second):
        rpm_across(first, second)


def rpm_across(first: HTTPConnection, second: HTTPConnection) -> None:
    """rpm=4 spent over two workers, alternately: one count, seen by both."""
    answers = [post(connection, "sk-rpm-2c4") for connection in (first, second, first, second)]
    assert [status for status, _, _ in answers] == [200] * 4
    assert [headers["x-ratelimit-remaining-requests"] for _, headers, _ in answers] == ["3", "2", "1", "0"]
    assert all(headers["x-ratelimit-limit-requests"] == "4" for _, headers, _ in answers)
    assert answers[0][1]["x-ratelimit-reset-requests"] == "1m0s"  # when its request leaves the minute
    for connection in (first, second):
        status, headers, body = post(connection, "sk-rpm-2c4")
        assert status == 429 and "4 requests per minute" in body["error"]["message"]
        assert 1 <= int(headers["retry-after"]) <= 60 and headers["x-ratelimit-remaining-requests"] == "0"
    assert "x-ratelimit-limit-requests" not in post(first, "sk-free-5a8")[1]  # a key without limits


def test_every_route_that_works_needs_the_key_and_counts_against_it(limited: Server) -> None:
    # llama-server's and Ollama's routes as much as /v1: none is a way around the key or its limits.
    url = limited.url
    unkeyed = httpx.post(url + "/completion", json={"prompt": "Hi", "n_predict": 1}, timeout=60)
    assert unkeyed.status_code == 401 and unkeyed.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(url + "/props", timeout=60).status_code == 401
    assert httpx.get(url + "/health", timeout=60).status_code == 200
    work = [
        ("/completion", {"prompt": "Hi", "n_predict": 1}),
        ("/api/generate", {"model": "x", "prompt": "Hi", "stream": False, "options": {"num_predict": 1}}),
        ("/tokenize", {"content": "Hi"}),
        ("/apply-template", {"messages": [{"role": "user", "content": "Hi"}]}),
    ]
    model = httpx.get(url + "/v1/models", headers=auth("sk-rpm-2c4"), timeout=60).json()["data"][0]["id"]
    answers = []
    for path, body in work:
        body = {**body, "model": model} if "model" in body else body
        answers.append(httpx.post(url + path, json=body, headers=auth("sk-rpm-2c4"), timeout=60))
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    assert [a.headers["x-ratelimit-remaining-requests"] for a in answers] == ["3", "2", "1", "0"]
    over = httpx.post(url + "/completion", json=work[0][1], headers=auth("sk-rpm-2c4"), timeout=60)
    assert over.status_code == 429 and "4 requests per minute" in over.text


def test_a_background_response_holds_its_keys_place_and_counts_its_tokens_until_it_ends(
    limited: Server,
) -> None:
    # Its POST answers at once; the run it started is the key's work until it ends.
    def background(key: str, max_output_tokens: int) -> dict:
        body = {"model": "x", "input": "Count to fifty.", "background": True, "temperature": 0,
                "max_output_tokens": max_output_tokens}  # fmt: skip
        models = httpx.get(limited.url + "/v1/models", headers=auth(key), timeout=30).json()
        body["model"] = models["data"][0]["id"]
        answer = httpx.post(limited.url + "/v1/responses", json=body, headers=auth(key), timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def finished(key: str, rid: str) -> dict | None:
        stored = httpx.get(f"{limited.url}/v1/responses/{rid}", headers=auth(key), timeout=30).json()
        return stored if stored["status"] not in ("queued", "in_progress") else None

    running = background("sk-conc-7d1", 400)
    assert running["status"] in ("queued", "in_progress")
    refused = complete(limited, "sk-conc-7d1")
    assert refused.status_code == 429 and "1 generations at once" in refused.text
    httpx.post(f"{limited.url}/v1/responses/{running['id']}/cancel", headers=auth("sk-conc-7d1"), timeout=30)
    wait_until(lambda: finished("sk-conc-7d1", running["id"]), 60, "the background run ended")
    wait_until(lambda: complete(limited, "sk-conc-7d1").status_code == 200, 30, "its place given back")

    done = background("sk-tpm-9e0", 8)
    wait_until(lambda: finished("sk-tpm-9e0", done["id"]), 60, "the background run ended")
    usage = finished("sk-tpm-9e0", done["id"])["usage"]
    used = usage["input_tokens"] + usage["output_tokens"]
    remaining = complete(limited, "sk-tpm-9e0").headers["x-ratelimit-remaining-tokens"]
    assert remaining == str(max(0, 60 - used))


def test_tokens_per_minute_count_prompt_and_completion(limited: Server) -> None:
    used = 0
    while used < 60:  # each answer counts its prompt and completion tokens, on either worker
        answer = complete(limited, "sk-tpm-9e0", max_tokens=12)
        assert answer.status_code == 200, (used, answer.text)
        assert answer.headers["x-ratelimit-remaining-tokens"] == str(max(0, 60 - used))  # before this one
        usage = answer.json()["usage"]
        used += usage["prompt_tokens"] + usage["completion_tokens"]
    over = complete(limited, "sk-tpm-9e0")
    assert over.status_code == 429 and "60 tokens per minute" in over.json()["error"]["message"]
    assert over.headers["x-ratelimit-remaining-tokens"] == "0"
    samples = scrape(limited)
    assert not any(secret in httpx.get(limited.url + "/metrics").text for secret in SECRETS)  # names only
    assert value(samples, "llm_key_requests_total", key="tpm", status="429") == 1
    prompt = value(samples, "llm_key_prompt_tokens_total", key="tpm")
    assert prompt + value(samples, "llm_key_completion_tokens_total", key="tpm") == used


def test_the_openai_sdk_retries_on_its_own_after_a_limit(
    limited: Server, request: pytest.FixtureRequest
) -> None:
    # conc's one generation is held by a stream; the SDK's retry waits Retry-After and gets in.
    client = openai.OpenAI(base_url=limited.url + "/v1", api_key="sk-conc-7d1", max_retries=4)
    request.addfinalizer(client.close)
    model = client.models.list().data[0].id
    raw = None
    with model_busy(limited.port, headers=auth("sk-conc-7d1")):

        def ask() -> None:
            nonlocal raw
            raw = client.completions.with_raw_response.create(model=model, prompt="Hi", max_tokens=2)

        caller = threading.Thread(target=ask)
        caller.start()
        wait_for_log(limited, "status=429", timeout=30)  # its first attempt was refused
    caller.join(60)  # the stream hung up on leaving the block: a retry got in
    assert raw is not None and raw.http_response.status_code == 200
    assert raw.retries_taken >= 1


def test_sighup_rereads_the_key_file_while_a_stream_runs(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice sk-alice-1\n")
    server = start_server(LLM_WORKERS="1", LLM_N_THREADS="1", LLM_API_KEYS_FILE=str(keys))
    body = {"prompt": "1, 2, 3,", "max_tokens": 400, "temperature": 0, "stream": True}
    lines: list[str] = []

    def stream() -> None:
        url = server.url + "/v1/completions"
        with httpx.stream("POST", url, json=body, headers=auth("sk-alice-1"), timeout=120) as answer:
            for line in answer.iter_lines():
                if line:
                    lines.append(line)

    reader = threading.Thread(target=stream)
    reader.start()
    wait_until(lambda: len(lines) > 3, 30, "the stream under way")
    keys.write_text("bob sk-bob-2 rpm=100\n")
    server.process.send_signal(signal.SIGHUP)
    assert reader.is_alive()  # the reload comes while the stream runs
    wait_until(lambda: complete(server, "sk-bob-2").status_code == 200, 60, "bob's key in force")
    reader.join(120)
    assert lines[-1] == "data: [DONE]" and '"finish_reason":"length"' in "".join(lines)  # not dropped
    assert complete(server, "sk-alice-1").status_code == 401

    keys.write_text("bob sk-bob-2 rpm=many\n")  # an edit gone wrong: the server stays up, bob stays in
    server.process.send_signal(signal.SIGHUP)
    wait_for_log(server, "the keys read before stay in force", timeout=30)
    wait_until(lambda: complete(server, "sk-bob-2").status_code == 200, 60, "bob still in")
    assert server.process.poll() is None
