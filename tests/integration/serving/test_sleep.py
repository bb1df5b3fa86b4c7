"""Start-up models asleep: idle past LLM_SLEEP_IDLE or told by vLLM's /sleep, woken by a request or /wake_up.

The real gunicorn with two start-up workers of the real model: while asleep a worker gives
its model's memory back (measured from /proc), stays ready for health checks, and answers
/props without waking; the next request wakes it and answers as before (temperature 0),
a streamed one with keep-alives while it waits; a request landing on a sleeping worker
goes to an awake one with room instead; a worker serving requests stays awake (a 409).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support.waits import wait_for_log, wait_until

KEY = "key-sleep"
AUTH = {"Authorization": f"Bearer {KEY}"}
MESSAGES = [{"role": "user", "content": "Name three colours."}]


MODELS = [{"id": "smol", "path": default_model_path(), "workers": 2, "n_ctx": 2048, "parallel": 2}]


@pytest.fixture(scope="module")
def idle_server() -> Iterator[Server]:
    """Each worker's model sleeps after a second without requests."""
    env = {"LLM_SLEEP_IDLE": "1", "LLM_SSE_KEEPALIVE": "0.05"}
    with serving_models(MODELS, answers=6, LLM_ADMIN_KEYS=KEY, **env) as server:
        yield server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """Models sleep only when told."""
    with serving_models(MODELS, answers=6, LLM_ADMIN_KEYS=KEY) as server:
        yield server


@pytest.fixture
def sdk(server: Server) -> Iterator[openai.OpenAI]:
    assert wake_up(server).status_code == 200  # each test starts with both workers awake
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0) as client:
        yield client


def workers(server: Server) -> list[dict]:
    return httpx.get(server.url + "/health/workers", timeout=10).json()["data"]


def is_sleeping(server: Server) -> bool:
    answer = httpx.get(server.url + "/is_sleeping", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    sleeping: bool = answer.json()["is_sleeping"]
    return sleeping


def sleep(server: Server, **params: str) -> httpx.Response:
    return httpx.post(server.url + "/sleep", params=params, headers=AUTH, timeout=60)


def wake_up(server: Server) -> httpx.Response:
    return httpx.post(server.url + "/wake_up", headers=AUTH, timeout=120)


def metric(text: str, series: str) -> float:
    (value,) = [line.split()[-1] for line in text.splitlines() if line.startswith(series + " ")]
    return float(value)


def asleep_gauge(server: Server) -> float:
    text = httpx.get(server.url + "/metrics", headers=AUTH, timeout=10).text
    return metric(text, 'llm_workers_asleep{model="smol"}') if "llm_workers_asleep{" in text else 0.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def chat(url: str, **extra: object) -> str:
    with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
        answer = client.chat.completions.create(
            model="smol", messages=MESSAGES, max_tokens=16, temperature=0, **extra
        )
    return answer.choices[0].message.content or ""


def test_an_idle_model_sleeps_gives_its_memory_back_and_the_next_request_wakes_it(
    idle_server: Server,
) -> None:
    awake = chat(idle_server.url)
    pids = [worker["pid"] for worker in workers(idle_server)]
    wait_until(lambda: is_sleeping(idle_server), 30, "both workers to fall asleep")
    log = wait_for_log(idle_server, "asleep (idle)", count=2)
    assert "Traceback" not in log
    # A worker says it sleeps before its engine is closed; the gauge is set once it is (and each
    # worker slept once already after start-up, so the log's count alone does not say so).
    wait_until(lambda: asleep_gauge(idle_server) == 2, 30, "both engines to be closed")
    asleep = {pid: rss_kib(pid) for pid in pids}
    # Asleep is healthy: ready, listed, and each worker says so.
    assert httpx.get(idle_server.url + "/health/ready", timeout=10).status_code == 200
    assert all(worker["asleep"] and worker["ready"] for worker in workers(idle_server))
    listed = httpx.get(idle_server.url + "/v1/models/smol", headers=AUTH, timeout=10).json()
    assert [worker["asleep"] for worker in listed["workers"]] == [True, True]
    metrics = httpx.get(idle_server.url + "/metrics", headers=AUTH, timeout=10).text
    # (Each worker slept once already after start-up, before any request: idle since it began.)
    assert metric(metrics, 'llm_model_sleeps_total{model="smol",reason="idle"}') >= 2
    assert metric(metrics, 'llm_workers_asleep{model="smol"}') == 2
    # The next request wakes the worker it lands on (held generating, so that it stays awake while
    # measured): its weights and KV cache are back.
    with openai.OpenAI(base_url=idle_server.url + "/v1", api_key=KEY, max_retries=0) as client:
        stream = client.chat.completions.create(
            model="smol", messages=MESSAGES, max_tokens=200, stream=True, extra_body={"ignore_eos": True}
        )
        chunks = iter(stream)
        next(chunks)
        wait_for_log(idle_server, "model smol awake in")
        (pid,) = [w["pid"] for w in workers(idle_server) if w["generating"]]
        awake_rss = rss_kib(pid)
        assert awake_rss - asleep[pid] > 50_000, (asleep[pid], awake_rss)
        assert sum(1 for _ in chunks) > 10
    metrics = httpx.get(idle_server.url + "/metrics", headers=AUTH, timeout=10).text
    assert metric(metrics, 'llm_model_wake_seconds_count{model="smol"}') >= 1
    assert chat(idle_server.url) == awake  # a woken model answers as before its sleep
    # And it falls asleep again, its memory freed once more.
    wait_until(lambda: asleep_gauge(idle_server) == 2, 30, "the woken worker to fall asleep again")
    assert awake_rss - rss_kib(pid) > 50_000, (awake_rss, rss_kib(pid))


def test_a_streamed_request_to_a_sleeping_model_streams_once_it_has_woken(idle_server: Server) -> None:
    whole = chat(idle_server.url, seed=3)
    wait_until(lambda: is_sleeping(idle_server), 30, "both workers to fall asleep")
    woke_before = idle_server.output().count("model smol awake in")
    body = {
        "model": "smol",
        "messages": MESSAGES,
        "max_tokens": 16,
        "temperature": 0,
        "seed": 3,
        "stream": True,
    }
    url = idle_server.url + "/v1/chat/completions"
    with httpx.stream("POST", url, json=body, headers=AUTH, timeout=60) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in answer.iter_lines() if line]
    log = wait_for_log(idle_server, "model smol awake in", count=woke_before + 1)
    keep_alives = [line for line in lines if line.startswith(":")]
    load_seconds = float(log.rsplit("model smol awake in ", 1)[1].split("s", 1)[0])
    if load_seconds > 0.3:  # keep-alives every 0.05 s of silence while it loaded
        assert keep_alives, lines[:5]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == whole


def test_sleep_and_wake_up_act_on_every_worker_and_props_does_not_wake(
    server: Server, sdk: openai.OpenAI
) -> None:
    props = httpx.get(server.url + "/props", headers=AUTH, timeout=10).json()
    assert props["is_sleeping"] is False and not is_sleeping(server)
    assert httpx.post(server.url + "/sleep", timeout=10).status_code == 401  # behind the keys
    done = sleep(server)
    assert done.status_code == 200 and done.json() == {"success": True}
    assert is_sleeping(server) and all(worker["asleep"] for worker in workers(server))
    for _ in range(4):  # on fresh connections, so both workers answer some: none wakes
        asleep = httpx.get(server.url + "/props", headers=AUTH, timeout=10).json()
        assert asleep == {**props, "is_sleeping": True}
    assert is_sleeping(server)
    assert httpx.get(server.url + "/health/ready", timeout=10).status_code == 200
    woke = wake_up(server)
    assert woke.status_code == 200 and woke.json() == {"success": True}
    assert not is_sleeping(server) and not any(worker["asleep"] for worker in workers(server))
    assert all(worker["ready"] for worker in workers(server))
    assert sdk.chat.completions.create(model="smol", messages=MESSAGES, max_tokens=4).choices[0].message


def test_bad_levels_are_a_400_naming_the_field(server: Server, sdk: openai.OpenAI) -> None:
    refused = sleep(server, level="3")
    assert refused.status_code == 400
    assert (
        refused.json()["error"]["param"] == "level"
        and "level must be 1 or 2" in refused.json()["error"]["message"]
    )
    assert not is_sleeping(server)
    assert sleep(server, level="2").status_code == 200 and is_sleeping(server)


def test_a_worker_serving_a_stream_stays_awake_and_requests_go_to_it(
    server: Server, sdk: openai.OpenAI
) -> None:
    stream = sdk.chat.completions.create(
        model="smol", messages=MESSAGES, max_tokens=400, temperature=0, stream=True,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    chunks = cast(Iterator[ChatCompletionChunk], iter(stream))
    first = next(chunks)  # generating on one worker now
    refused = sleep(server)
    assert refused.status_code == 409 and "1 worker(s) serve requests" in refused.json()["error"]["message"]
    (busy,) = [w for w in workers(server) if not w["asleep"]]
    (idle,) = [w for w in workers(server) if w["asleep"]]
    # Requests that land on the sleeping worker (each on a fresh connection, which the kernel gives
    # either worker) go to the awake one, which has a free sequence: the sleeping one stays asleep.
    results = {chat(server.url) for _ in range(6)}
    assert len(results) == 1
    assert [w["asleep"] for w in workers(server) if w["slot"] == idle["slot"]] == [True]
    assert [w["asleep"] for w in workers(server) if w["slot"] == busy["slot"]] == [False]
    rest = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert first.choices and rest  # the stream went on, whole
    assert sleep(server).status_code == 200 and is_sleeping(server)
