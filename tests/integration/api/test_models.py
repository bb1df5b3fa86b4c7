"""Several models in one gunicorn: routing between workers, readiness, restarts, embeddings, tokenizing."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support import tiny_bert
from tests.support.clients import openai_client
from tests.support.procs import worker_holding, worker_pids
from tests.support.rawhttp import read_chunk, read_head, request_bytes
from tests.support.waits import wait_for_log, wait_until

MODELS = [
    {"id": "smol-a", "path": default_model_path(), "workers": 1, "n_ctx": 1024},
    {"id": "smol-b", "path": default_model_path(), "workers": 1, "parallel": 2, "aliases": ["gpt-4o-mini"]},
    {"id": "smol-embed", "path": default_model_path(), "workers": 1, "embedding": True, "pooling": "mean",
     "n_ctx": 512},
]  # fmt: skip


@pytest.fixture(scope="module")
def models_server() -> Iterator[Server]:
    with serving_models(MODELS, answers=9, LLM_SSE_KEEPALIVE="1") as server:
        yield server


@pytest.fixture
def client(models_server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(models_server) as sdk:
        yield sdk


def served_by(server: Server, marker: str) -> str:
    """The model named on the access line of the request with id `marker` (the worker that generated it)."""
    line = wait_for_log(server, f"[{marker}] app.access")
    return re.search(rf"\[{marker}\] app\.access: .* model=(\S+)", line).group(1)


def test_every_model_is_listed_ready(models_server: Server) -> None:
    listed = httpx.get(models_server.url + "/v1/models", timeout=10).json()["data"]
    assert [(m["id"], m["ready"], m["kind"]) for m in listed] == [
        ("smol-a", True, "generation"),
        ("smol-b", True, "generation"),
        ("smol-embed", True, "embedding"),
    ]
    assert httpx.get(models_server.url + "/health/ready", timeout=10).status_code == 200
    assert [m["aliases"] for m in listed] == [[], ["gpt-4o-mini"], []]


def test_an_alias_reaches_its_model(models_server: Server, client: openai.OpenAI) -> None:
    """One model under several ids (llama-server's --alias): a client's hard-coded name works."""
    for attempt in range(4):  # fresh connections: the alias resolves on whichever worker answers
        marker = f"alias-{attempt}"
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
        answer = httpx.post(models_server.url + "/v1/chat/completions", json=body, timeout=60,
                            headers={"X-Request-ID": marker})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert served_by(models_server, marker) == "smol-b"
    assert client.models.retrieve("gpt-4o-mini").id == "smol-b"


def test_requests_reach_a_worker_holding_their_model(models_server: Server) -> None:
    for attempt in range(6):  # fresh connections land on any of the three workers
        for model in ("smol-a", "smol-b"):
            marker = f"route-{model}-{attempt}"
            body = {"model": model, "prompt": "Hi", "max_tokens": 2}
            headers = {"X-Request-ID": marker}
            assert (
                httpx.post(
                    models_server.url + "/v1/completions", json=body, headers=headers, timeout=60
                ).status_code
                == 200
            )
            assert served_by(models_server, marker) == model
    # No model: the first one listed.
    headers = {"X-Request-ID": "route-default"}
    httpx.post(
        models_server.url + "/v1/completions",
        json={"prompt": "Hi", "max_tokens": 2},
        headers=headers,
        timeout=60,
    )
    assert served_by(models_server, "route-default") == "smol-a"


def worker_models(server: Server) -> dict[int, str]:
    """Which model each worker process loaded, from the log."""
    pattern = r"\[(\d+)\] \[INFO\] \[-\] app\.engine\.engine: model (\S+) loaded"
    return {int(pid): model for pid, model in re.findall(pattern, server.output())}


def stream_over(sock: socket.socket, port: int, body: dict) -> bytes:
    """Send `body` on an open connection; the whole chunked answer."""
    sock.sendall(request_bytes(port, "POST", "/v1/completions", body))
    with sock, sock.makefile("rb") as reader:
        assert read_head(reader)[0] == 200
        chunks = []
        while (chunk := read_chunk(reader)) is not None:
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_relayed_stream_is_byte_identical_to_a_direct_one(models_server: Server) -> None:
    models = worker_models(models_server)
    seen: dict[bool, bytes] = {}  # accepted by a worker holding the model (direct) or not (relayed)
    model = None
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", models_server.port), timeout=60)
        holder = wait_until(
            lambda s=sock: worker_holding(models_server.process.pid, s), what="an accepted connection"
        )
        if model is None and models[holder] != "smol-embed":
            model = models[holder]  # the same request, for a model this worker holds, then for a relay
        direct = models[holder] == model
        if model is None or direct in seen:
            sock.close()
            continue
        body = {"model": model, "prompt": "Count: 1, 2,", "max_tokens": 12, "temperature": 0, "stream": True}
        seen[direct] = stream_over(sock, models_server.port, body)
        if len(seen) == 2:
            break
    assert len(seen) == 2, "every connection landed on the same kind of worker"
    # Only each answer's own id, creation time and timings (llama-server's `timings`) may differ.
    own = rb'"(id|created)":("[^"]*"|\d+)|"timings":\{[^}]*\}'
    here, there = (re.sub(own, b"", seen[k]) for k in (True, False))
    assert here == there and here.endswith(b"data: [DONE]\n\n")


def test_unknown_and_wrong_kind_of_model(models_server: Server, client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.completions.create(model="gpt-4", prompt="Hi", max_tokens=2)
    assert missing.value.code == "model_not_found"
    assert all(name in missing.value.message for name in ("smol-a", "smol-b", "smol-embed"))
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        client.chat.completions.create(model="smol-embed", messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.BadRequestError, match="does not compute embeddings"):
        client.embeddings.create(model="smol-a", input="Hi")


def test_embeddings_float_base64_batches_and_token_ids(client: openai.OpenAI) -> None:
    texts = ["The cat sat on the mat.", "Quantum chromodynamics", "🙂 émoji and ünïcode", "short"]
    batch = client.embeddings.create(model="smol-embed", input=texts)
    assert [d.index for d in batch.data] == [0, 1, 2, 3] and batch.usage.prompt_tokens > 4
    vectors = np.array([d.embedding for d in batch.data])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    one_by_one = np.array(
        [client.embeddings.create(model="smol-embed", input=t).data[0].embedding for t in texts]
    )
    assert np.allclose(vectors, one_by_one, atol=1e-3)  # batched equals alone, within float tolerance
    assert vectors[0] @ one_by_one[0] == pytest.approx(1.0, abs=1e-3)  # a text is most similar to itself
    assert (vectors[0] @ vectors[1]) < 0.999
    # The SDK asks for base64 by default and decodes it (little-endian float32): the same as floats.
    floats = client.embeddings.create(model="smol-embed", input=texts, encoding_format="float")
    assert np.allclose(np.array([d.embedding for d in floats.data]), vectors, atol=1e-6)
    raw = client.embeddings.create(model="smol-embed", input=texts[:1], encoding_format="base64").data[0]
    assert np.allclose(np.frombuffer(base64.b64decode(raw.embedding), dtype="<f4"), vectors[0], atol=1e-6)
    # Token ids embed exactly as their text does.
    tokenize = str(client.base_url).replace("/v1/", "/tokenize")
    asked = {"model": "smol-embed", "content": texts[0], "add_special": True}
    tokens = httpx.post(tokenize, json=asked, timeout=30).json()["tokens"]
    by_ids = client.embeddings.create(model="smol-embed", input=[tokens]).data[0].embedding
    assert np.allclose(by_ids, vectors[0], atol=1e-5)
    # Naming no model, embeddings go to the first embedding model (chat to the first chat model).
    unnamed = httpx.post(str(client.base_url) + "embeddings", json={"input": texts[0]}, timeout=30).json()
    assert unnamed["model"] == "smol-embed"
    assert np.allclose(unnamed["data"][0]["embedding"], vectors[0], atol=1e-5)


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": ""}, "input", None),
        ({"input": []}, "input", None),
        ({"input": ["fine", ""]}, "input", None),
        ({"input": "word " * 600}, "input", "context_length_exceeded"),
        ({"input": [[1, 2, 999999]]}, "input", None),
        ({"input": "Hi", "dimensions": 64}, "dimensions", None),
        ({"input": "Hi", "encoding_format": "hex"}, "encoding_format", None),
    ],
)
def test_bad_embedding_inputs_are_400s(
    models_server: Server, body: dict, param: str, code: str | None
) -> None:
    response = httpx.post(
        models_server.url + "/v1/embeddings", json={"model": "smol-embed", **body}, timeout=30
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["code"] == code


def test_tokenize_and_detokenize_round_trip(models_server: Server) -> None:
    text = "Héllo wörld 🙂 — 日本語"
    tokens = httpx.post(models_server.url + "/tokenize", json={"content": text}, timeout=30).json()["tokens"]
    back = httpx.post(models_server.url + "/detokenize", json={"tokens": tokens}, timeout=30).json()
    assert back["content"] == text == back["prompt"]
    pieces = httpx.post(
        models_server.url + "/tokenize", json={"content": "🙂", "with_pieces": True}, timeout=30
    )
    entries = pieces.json()["tokens"]
    assert all(set(e) == {"id", "piece"} for e in entries)
    joined = b"".join(
        e["piece"].encode() if isinstance(e["piece"], str) else bytes(e["piece"]) for e in entries
    )
    assert joined.decode().strip() == "🙂"
    bad = httpx.post(models_server.url + "/detokenize", json={"tokens": [-1]}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens"


def test_tokenize_answers_vllms_count_and_the_context_of_the_model_asked(models_server: Server) -> None:
    for model, context in (("smol-a", 1024), ("smol-embed", 512)):
        body = {"model": model, "prompt": "one two three", "add_special_tokens": False}  # vLLM's names
        answer = httpx.post(models_server.url + "/tokenize", json=body, timeout=30).json()
        assert answer["count"] == len(answer["tokens"]) > 0 and answer["max_model_len"] == context
        assert "token_strs" not in answer
    # vLLM's return_token_strs: the vocabulary's own strings, as a tokenizer's convert_ids_to_tokens
    # gives them (SmolLM2's byte-level BPE writes a leading space as Ġ).
    body = {"model": "smol-a", "prompt": "Hello world", "return_token_strs": True}
    answer = httpx.post(models_server.url + "/tokenize", json=body, timeout=30).json()
    assert answer["token_strs"] == ["Hello", "Ġworld"] and len(answer["tokens"]) == 2


def test_chat_input_tokens_match_the_prompt_the_model_reads(models_server: Server) -> None:
    chat = {"model": "smol-b", "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 1}
    counted = httpx.post(
        models_server.url + "/v1/chat/completions/input_tokens", json=chat, timeout=30
    ).json()
    used = httpx.post(models_server.url + "/v1/chat/completions", json=chat, timeout=60).json()["usage"]
    assert counted["input_tokens"] == used["prompt_tokens"] > 5


def test_a_killed_worker_comes_back_with_its_model(models_server: Server, client: openai.OpenAI) -> None:
    live = worker_pids(models_server.process.pid)
    victim = next(
        pid for pid, model in worker_models(models_server).items() if model == "smol-embed" and pid in live
    )
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in worker_pids(models_server.process.pid), 30, "the worker's exit")
    wait_for_log(models_server, "model smol-embed loaded", timeout=60, count=2)
    wait_until(
        lambda: httpx.get(models_server.url + "/health/ready", timeout=5).status_code == 200, 60, "ready"
    )
    assert client.embeddings.create(model="smol-embed", input="back again").data[0].embedding


def metric(server: Server, name: str) -> float:
    for line in httpx.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_concurrent_embedding_requests_share_a_decode(start_server: Callable[..., Server]) -> None:
    spec = [{"id": "embed", "path": default_model_path(), "embedding": True, "pooling": "mean", "n_ctx": 512}]
    server = start_server(LLM_MODELS=json.dumps(spec), LLM_N_THREADS="1", LLM_MAX_QUEUE="16")
    url = server.url + "/v1/embeddings"
    # A causal model computes its output layer for every token even for embeddings: a few seconds.
    texts = [f"{i}: the quick brown fox jumps over the lazy dog near the river bank" for i in range(48)]
    with ThreadPoolExecutor(9) as pool:
        long_one = pool.submit(lambda: httpx.post(url, json={"input": texts}, timeout=300))
        wait_until(lambda: metric(server, "llm_generations_in_flight") == 1, what="the long request running")
        small = [f"small request {i}" for i in range(8)]
        answers = list(pool.map(lambda t: httpx.post(url, json={"input": t}, timeout=300), small))
        assert long_one.result().status_code == 200 and len(long_one.result().json()["data"]) == 48
    assert all(answer.status_code == 200 for answer in answers)
    # The eight waited together behind the long one, then went through one decode of 8 sequences.
    assert metric(server, "llm_sequences_busy") == 8
    alone = [httpx.post(url, json={"input": t}, timeout=30).json()["data"][0]["embedding"] for t in small]
    together = [answer.json()["data"][0]["embedding"] for answer in answers]
    assert np.allclose(together, alone, atol=1e-3)


def test_a_bert_like_embedding_model(
    start_server: Callable[..., Server], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The encoder-only path real embedding models take: no causal mask, no KV cache, [CLS] pooling
    from the GGUF, a trained context shorter than LLM_N_CTX."""
    bert = str(tiny_bert.write(tmp_path / "tiny-bert.gguf"))
    server = start_server(LLM_MODELS=json.dumps([{"id": "bert", "path": bert, "embedding": True}]))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    request.addfinalizer(client.close)
    texts = ["the cat sat on the mat", "hello world", "the quick brown fox jumps over the lazy dog"]
    batch = np.array([d.embedding for d in client.embeddings.create(model="bert", input=texts).data])
    assert batch.shape == (3, tiny_bert.EMBD)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    alone = np.array([client.embeddings.create(model="bert", input=t).data[0].embedding for t in texts])
    assert np.allclose(batch, alone, atol=1e-5)  # no attention across the inputs of one decode
    tokens = httpx.post(server.url + "/tokenize", json={"content": "hello world", "add_special": True}).json()
    assert tokens["tokens"][0] == 2 and tokens["tokens"][-1] == 3  # [CLS] ... [SEP], as the model wants
    # Its trained context is 128 tokens (LLM_N_CTX is 2048): longer is a 400, not garbage.
    with pytest.raises(openai.BadRequestError) as too_long:
        client.embeddings.create(model="bert", input="the cat " * 100)
    assert too_long.value.code == "context_length_exceeded" and "128" in too_long.value.message
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        client.completions.create(model="bert", prompt="the cat", max_tokens=2)
