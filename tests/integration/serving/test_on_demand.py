"""Models loaded on demand: a pool worker loads what a request asks for, swaps, unloads after its ttl.

The real gunicorn with a pinned worker and one on-demand pool worker, the real model (the
same GGUF under several ids and context sizes), the tiny BERT for an on-demand embedding
model, and the operator routes of llama-server's router mode behind an API key.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support import tiny_bert, tiny_models
from tests.support.batches import finished, jsonl, results
from tests.support.waits import wait_for_log, wait_until

KEY = "key-ops"
AUTH = {"Authorization": f"Bearer {KEY}"}
TENANT = "key-tenant-od"  # a tenant's key: its requests load models too, through the workers' own orders


@pytest.fixture(scope="module")
def pool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("on-demand")
    broken = folder / "truncated.gguf"  # a GGUF header and then nothing: llama.cpp refuses it
    broken.write_bytes(Path(default_model_path()).read_bytes()[: 1 << 20])
    bert = tiny_bert.write(folder / "tiny-bert.gguf")
    smol = default_model_path()
    models = [
        {"id": "pinned", "path": smol, "workers": 1, "n_ctx": 1024, "parallel": 2},
        {"id": "od-a", "path": smol, "load": "on_demand", "ttl": 3, "n_ctx": 2048, "aliases": ["smol-a"]},
        {"id": "od-b", "path": smol, "load": "on_demand", "n_ctx": 512, "parallel": 2},
        {"id": "od-embed", "path": str(bert), "load": "on_demand", "embedding": True, "pooling": "mean"},
        {"id": "od-broken", "path": str(broken), "load": "on_demand"},
        # One token twice in its vocabulary: llama.cpp would abort the worker loading it.
        {"id": "od-twice", "path": str(tiny_models.path("token-twice")), "load": "on_demand"},
    ]
    env = {"LLM_ADMIN_KEYS": KEY, "LLM_API_KEYS": TENANT, "LLM_QUEUE_TIMEOUT": "3", "LLM_SSE_KEEPALIVE": "1"}
    with serving_models(models, answers=6, **env) as server:
        yield server


@pytest.fixture
def sdk(pool_server: Server) -> Iterator[openai.OpenAI]:
    # Each test starts with the pool worker holding nothing.
    for model in ("od-a", "od-b", "od-embed"):
        wait_until(lambda model=model: order(pool_server, "unload", model).status_code == 200, 20)
    with openai.OpenAI(base_url=pool_server.url + "/v1", api_key=KEY, max_retries=0) as client:
        yield client


def order(server: Server, verb: str, model: str) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{verb}", json={"model": model}, headers=AUTH, timeout=60)


def listed(server: Server, model: str) -> dict:
    return httpx.get(f"{server.url}/v1/models/{model}", headers=AUTH, timeout=10).json()


def pool_pid(server: Server) -> int:
    workers = httpx.get(server.url + "/health/workers", timeout=10).json()["data"]
    (pid,) = [worker["pid"] for worker in workers if worker["on_demand"]]
    return pid


def rss_kib(pid: int) -> int:
    """The process's resident memory, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def chat(sdk: openai.OpenAI, model: str, **extra: object) -> str:
    answer = sdk.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, **extra
    )
    return answer.choices[0].message.content or ""


def test_on_demand_models_are_listed_unloaded_and_the_server_is_ready(pool_server: Server, sdk) -> None:
    models = {m["id"]: m for m in httpx.get(pool_server.url + "/v1/models", headers=AUTH).json()["data"]}
    assert models["pinned"]["status"] == {"value": "loaded"} and models["pinned"]["load"] == "startup"
    assert len(models["pinned"]["workers"]) == 1
    for name in ("od-a", "od-b", "od-embed", "od-broken"):
        assert (models[name]["status"], models[name]["workers"], models[name]["ready"]) == (
            {"value": "unloaded"}, [], False,
        )  # fmt: skip
        assert models[name]["load"] == "on_demand"
    assert models["od-a"]["ttl"] == 3 and models["od-a"]["aliases"] == ["smol-a"]
    assert httpx.get(pool_server.url + "/health/ready").status_code == 200  # pinned models only


def test_a_tenants_request_loads_its_model_though_loading_by_hand_is_the_operators(
    pool_server: Server,
) -> None:
    # A request landing on the pinned worker has the pool worker load its model by a relayed
    # /models/load, an operator's route: the peers' own orders are not refused (a tenant's is).
    body = {"model": "od-b", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4}
    tenant = {"Authorization": f"Bearer {TENANT}"}
    for _ in range(6):  # fresh connections, so that some land on the pinned worker
        assert order(pool_server, "unload", "od-b").status_code == 200
        answer = httpx.post(f"{pool_server.url}/v1/chat/completions", json=body, headers=tenant, timeout=60)
        assert answer.status_code == 200, answer.text
    refused = httpx.post(f"{pool_server.url}/models/load", json={"model": "od-b"}, headers=tenant, timeout=60)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "operator_only"


def test_reads_never_load_an_on_demand_model(pool_server: Server, sdk: openai.OpenAI) -> None:
    # A GET counts against no key's limit and answers while the server drains: it starts no load.
    for path in ("/props", "/slots", "/lora-adapters", "/tokenizer_info"):
        answer = httpx.get(f"{pool_server.url}{path}?model=od-b", headers=AUTH, timeout=30)
        assert answer.status_code == 400, (path, answer.text)
        assert answer.json()["error"]["code"] == "model_not_loaded", (path, answer.text)
    assert listed(pool_server, "od-b")["status"] == {"value": "unloaded"}
    chat(sdk, "od-b")  # loaded by a request that generates: the reads answer from it now
    props = httpx.get(f"{pool_server.url}/props?model=od-b", headers=AUTH, timeout=30)
    assert props.status_code == 200 and props.json()["default_generation_settings"]["n_ctx"] == 512


def test_a_request_loads_its_model_which_unloads_after_its_ttl_and_memory_returns(
    pool_server: Server, sdk: openai.OpenAI
) -> None:
    pid = pool_pid(pool_server)
    empty = rss_kib(pid)
    assert chat(sdk, "od-a")
    state = listed(pool_server, "od-a")
    assert state["status"] == {"value": "loaded"} and [w["pid"] for w in state["workers"]] == [pid]
    loaded = rss_kib(pid)
    assert loaded - empty > 50_000, (empty, loaded)  # weights and a 2048-cell context's KV cache
    wait_for_log(pool_server, "model od-a loaded in")
    # Unloaded once idle for its ttl (3 s), by the worker itself: no request asks for it.
    wait_until(lambda: listed(pool_server, "od-a")["status"] == {"value": "unloaded"}, 30, "the ttl unload")
    wait_for_log(pool_server, "model od-a unloaded (ttl")
    after = rss_kib(pid)
    assert after - empty < (loaded - empty) / 2, (empty, loaded, after)  # most of it went back
    assert pool_pid(pool_server) == pid  # the same process, still serving
    metrics = httpx.get(pool_server.url + "/metrics", headers=AUTH).text
    assert 'llm_model_on_demand_load_seconds_count{model="od-a"}' in metrics
    assert 'llm_model_unloads_total{model="od-a",reason="ttl"}' in metrics
    workers = httpx.get(pool_server.url + "/health/workers").json()["data"]
    (pool,) = [w for w in workers if w["on_demand"]]
    assert pool["model"] is None and pool["load_seconds"] > 0  # what its last load took


def test_two_on_demand_models_take_turns_on_one_pool_worker(pool_server: Server, sdk: openai.OpenAI) -> None:
    pid = pool_pid(pool_server)
    assert chat(sdk, "od-b", seed=1, temperature=0)
    assert [w["pid"] for w in listed(pool_server, "od-b")["workers"]] == [pid]
    assert chat(sdk, "smol-a", seed=1, temperature=0)  # od-a by its alias: od-b (idle) makes way
    assert listed(pool_server, "od-b")["status"] == {"value": "unloaded"}
    assert [w["pid"] for w in listed(pool_server, "od-a")["workers"]] == [pid]
    wait_for_log(pool_server, "model od-b unloaded (evicted")
    # The same model and prompt: the same answer from the pinned worker as from the pool.
    assert chat(sdk, "pinned", seed=1, temperature=0) == chat(sdk, "od-a", seed=1, temperature=0)


def test_an_on_demand_embedding_model_loads_and_makes_way(pool_server: Server, sdk: openai.OpenAI) -> None:
    vectors = sdk.embeddings.create(model="od-embed", input=["the cat sat", "the dog sat"]).data
    assert len(vectors) == 2 and len(vectors[0].embedding) == tiny_bert.EMBD
    assert chat(sdk, "od-b")  # the embedding model, idle, is unloaded for it
    assert listed(pool_server, "od-embed")["status"] == {"value": "unloaded"}


def test_load_and_unload_need_a_key_and_do_what_they_say(pool_server: Server, sdk: openai.OpenAI) -> None:
    url = pool_server.url
    assert httpx.post(url + "/models/load", json={"model": "od-b"}).status_code == 401
    assert httpx.post(url + "/models/unload", json={"model": "od-b"}).status_code == 401
    loaded = order(pool_server, "load", "od-b")
    assert (loaded.status_code, loaded.json()) == (200, {"success": True})
    assert listed(pool_server, "od-b")["status"] == {"value": "loaded"}  # ready when load answers
    assert order(pool_server, "load", "od-b").json() == {"success": True}  # already: nothing to do
    unloaded = order(pool_server, "unload", "od-b")
    assert (unloaded.status_code, unloaded.json()) == (200, {"success": True})
    assert listed(pool_server, "od-b")["status"] == {"value": "unloaded"}
    assert order(pool_server, "load", "pinned").json() == {"success": True}  # loaded for good
    pinned = order(pool_server, "unload", "pinned")
    assert pinned.status_code == 400 and pinned.json()["error"]["param"] == "model"
    assert "loaded at start-up" in pinned.json()["error"]["message"]
    missing = order(pool_server, "load", "nope")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "model_not_found")
    empty = httpx.post(url + "/models/load", json={}, headers=AUTH)
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "model"


def long_stream(sdk: openai.OpenAI, model: str) -> openai.Stream[ChatCompletionChunk]:
    """A stream of 1,900 tokens: its worker busy until the test closes it."""
    return sdk.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count to a thousand."}],
        max_tokens=1900,
        stream=True,
        extra_body={"min_tokens": 1900},
    )


def test_a_busy_model_stays_and_a_request_for_another_waits_then_gets_a_503(
    pool_server: Server, sdk: openai.OpenAI
) -> None:
    stream = long_stream(sdk, "od-a")  # busy for far longer than LLM_QUEUE_TIMEOUT (3 s)
    try:
        next(iter(stream))
        busy = order(pool_server, "unload", "od-a")
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "model_busy")
        # The one pool worker serves od-a: od-b waits for it, up to LLM_QUEUE_TIMEOUT.
        with pytest.raises(openai.InternalServerError) as refused:
            chat(sdk, "od-b")
        assert refused.value.status_code == 503
        assert refused.value.response.headers["Retry-After"] == "1"
        assert "on-demand workers serve other models" in refused.value.message
    finally:
        stream.close()
    wait_for_log(pool_server, "request cancelled by its client")
    assert chat(sdk, "od-b")  # once od-a is idle, the pool worker takes od-b


def test_a_request_whose_client_hung_up_while_it_waited_loads_nothing(
    pool_server: Server, sdk: openai.OpenAI
) -> None:
    stream = long_stream(sdk, "od-a")  # the one pool worker busy until the stream is closed
    cancelled = pool_server.output().count("request cancelled by its client")
    try:
        next(iter(stream))
        # od-b waits for the pool worker; its client hangs up meanwhile.
        body = json.dumps({"model": "od-b", "messages": [{"role": "user", "content": "Hi"}]}).encode()
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
        host, port = pool_server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(head.encode() + body)  # and closed at once: the request is read all the same
        wait_for_log(pool_server, "a request for 'od-b' gave up waiting for it: its client hung up")
    finally:
        stream.close()
    wait_for_log(pool_server, "request cancelled by its client", count=cancelled + 1)
    # The pool worker is free now; nobody asked for od-b any more, so od-a stays and od-b is not loaded.
    assert listed(pool_server, "od-a")["status"] == {"value": "loaded"}
    assert listed(pool_server, "od-b")["status"] != {"value": "loaded"}


def test_waiting_requests_for_one_model_share_one_load(pool_server: Server, sdk: openai.OpenAI) -> None:
    answers: list[str] = []
    threads = [threading.Thread(target=lambda: answers.append(chat(sdk, "od-b"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 4 and all(answers)
    assert listed(pool_server, "od-b")["status"] == {"value": "loaded"}


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("od-broken", "could not be loaded"),
        ("od-twice", "could not be loaded: its vocabulary holds the token 'Hello' twice"),
    ],
)
def test_a_model_that_cannot_load_is_a_clear_503_and_the_pool_worker_stays(
    pool_server: Server, sdk: openai.OpenAI, model: str, why: str
) -> None:
    pid = pool_pid(pool_server)
    with pytest.raises(openai.InternalServerError) as failed:
        chat(sdk, model)
    assert failed.value.status_code == 503
    assert f"The model '{model}' {why}" in failed.value.message
    assert "/" not in failed.value.message  # where the operator keeps its models is not the client's
    loading = order(pool_server, "load", model)  # the operator's route says it no otherwise
    assert loading.status_code == 503 and "/" not in loading.json()["error"]["message"], loading.text
    assert listed(pool_server, model)["status"] == {"value": "unloaded"}
    assert pool_pid(pool_server) == pid
    assert chat(sdk, "od-a")  # the pool worker serves on


def test_a_batch_line_for_an_on_demand_model_is_a_clear_error_line(
    pool_server: Server, sdk: openai.OpenAI
) -> None:
    def line(custom_id: str, model: str) -> dict[str, object]:
        body = {"model": model, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 4}
        return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}

    upload = jsonl([line("pinned", "pinned"), line("on-demand", "smol-a")])
    batch_file = sdk.files.create(file=("requests.jsonl", upload), purpose="batch")
    batch = sdk.batches.create(
        input_file_id=batch_file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = finished(sdk, batch.id, timeout=120)
    assert done.status == "completed"
    assert [answer["custom_id"] for answer in results(sdk, done.output_file_id)] == ["pinned"]
    (refused,) = results(sdk, done.error_file_id)
    assert refused["custom_id"] == "on-demand" and refused["response"]["status_code"] == 400
    error = refused["response"]["body"]["error"]
    assert error["param"] == "model" and "batches run on the models loaded at start-up" in error["message"]


def test_a_streamed_request_for_an_unloaded_model_streams_once_it_has_loaded(
    pool_server: Server, sdk: openai.OpenAI
) -> None:
    whole = chat(sdk, "od-b", seed=3, temperature=0)
    wait_until(lambda: order(pool_server, "unload", "od-b").status_code == 200, 20)
    assert listed(pool_server, "od-b")["status"] == {"value": "unloaded"}
    stream = sdk.chat.completions.create(
        model="od-b", messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, seed=3,
        temperature=0, stream=True,
    )  # fmt: skip
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == whole
    assert listed(pool_server, "od-b")["status"] == {"value": "loaded"}


def test_a_streamed_request_whose_model_cannot_load_ends_with_the_protocols_error_event(
    pool_server: Server, sdk: openai.OpenAI
) -> None:
    # The 200 and the stream's headers went out when the load began; the failure is an event.
    with pytest.raises(openai.APIError) as failed:
        stream = sdk.chat.completions.create(
            model="od-broken", messages=[{"role": "user", "content": "Hi."}], max_tokens=4, stream=True
        )
        list(stream)
    assert "could not be loaded" in failed.value.message
    messages = [{"role": "user", "content": "Hi."}]
    body = {"model": "od-broken", "max_tokens": 4, "stream": True, "messages": messages}
    url = pool_server.url + "/v1/messages"
    with httpx.stream("POST", url, json=body, headers=AUTH, timeout=60) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in answer.iter_lines() if line and not line.startswith(":")]
    assert lines[0] == "event: error" and '"type":"error"' in lines[1] and "could not be loaded" in lines[1]
