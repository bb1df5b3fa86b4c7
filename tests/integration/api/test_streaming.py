"""The SSE contract against the real server: Accept, keep-alives, errors after the 200, disconnects."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable

import httpx
import openai
import pytest
from httpx_sse import connect_sse

from harness.servers import Server
from tests.support.busy import model_busy
from tests.support.rawhttp import fetch, open_request, read_chunk, read_head
from tests.support.waits import generations_in_flight, wait_for_log, wait_until

CHAT = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0}
COMPLETION = {"prompt": "Hello", "max_tokens": 8, "temperature": 0}
MODEL = "SmolLM2-135M-Instruct.Q4_1"
ENDPOINTS = [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)]
ACCEPTED = [
    None,
    "application/json",
    "text/event-stream",
    "application/json, text/event-stream",
    "*/*",
    "text/event-stream;q=0.9, application/json;q=0.1",
    "text/html, */*;q=0.1",
]


@pytest.mark.parametrize(("path", "body"), ENDPOINTS)
@pytest.mark.parametrize("accept", ACCEPTED)
@pytest.mark.parametrize("stream", [False, True])
def test_accept_never_switches_the_format(
    server: Server, path: str, body: dict, accept: str | None, stream: bool
) -> None:
    headers = {"Content-Type": "application/json"} | ({"Accept": accept} if accept else {})
    response = fetch(server.port, "POST", path, {**body, "stream": stream}, headers)
    assert response.status == 200
    expected = "text/event-stream; charset=utf-8" if stream else "application/json"
    assert response.header("content-type") == expected
    assert response.body.endswith(b"data: [DONE]\n\n") if stream else json.loads(response.body)["choices"]


@pytest.mark.parametrize(("path", "body"), ENDPOINTS)
@pytest.mark.parametrize("accept", ["text/html", "application/json;q=0, text/event-stream;q=0", "image/*"])
def test_unacceptable_accept_is_406(server: Server, path: str, body: dict, accept: str) -> None:
    response = fetch(
        server.port,
        "POST",
        path,
        {**body, "stream": True},
        {"Content-Type": "application/json", "Accept": accept},
    )
    assert response.status == 406
    assert json.loads(response.body)["error"]["code"] == "not_acceptable"


def test_queued_stream_gets_headers_at_once_then_keepalives(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="1", LLM_SSE_KEEPALIVE="0.5")
    with model_busy(server.port) as ended:
        sent = time.monotonic()
        sock = open_request(server.port, "POST", "/v1/completions", {**COMPLETION, "stream": True})
        reader = sock.makefile("rb")
        status, headers = read_head(reader)
        headers_after = time.monotonic() - sent
        frames = [read_chunk(reader) for _ in range(3)]
        sock.close()
        assert not ended.is_set()  # all of this happened while the model was busy
    assert status == 200 and ("content-type", "text/event-stream; charset=utf-8") in headers
    assert headers_after < 5  # at once, not after the 15 s the busy stream would take
    assert frames == [b": keep-alive\n\n"] * 3


def test_keepalive_zero_sends_none(start_server: Callable[..., Server]) -> None:
    # The busy stream is cut by the server at 6 s on any machine (more tokens than any makes
    # in that time), so the other request waits longer than the default interval of 5 s.
    server = start_server(
        LLM_PARALLEL="1", LLM_SSE_KEEPALIVE="0", LLM_N_CTX="8192", LLM_MAX_GENERATION_SECONDS="6"
    )
    busy = {"prompt": "1, 2, 3,", "max_tokens": 8000, "ignore_eos": True, "temperature": 0, "stream": True}
    with model_busy(server.port, busy) as ended:
        started = time.monotonic()
        response = fetch(server.port, "POST", "/v1/completions", {**COMPLETION, "stream": True})
        assert ended.wait(5)
    # Queued for longer than the default interval (5 s), yet no comment was sent.
    assert time.monotonic() - started > 5
    assert response.status == 200 and response.body.startswith(b"data: {")
    assert b"keep-alive" not in response.body


def test_sdks_ignore_keepalives_while_queued(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="1", LLM_SSE_KEEPALIVE="0.2")
    request = {**CHAT, "model": MODEL, "stream": True, "seed": 3}
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as client:
        alone = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**request))
        with model_busy(server.port, {**COMPLETION, "max_tokens": 150, "stream": True}) as ended:
            queued = "".join(
                c.choices[0].delta.content or "" for c in client.chat.completions.create(**request)
            )
            # Queued behind 150 tokens, the stream waited through several 0.2 s keep-alives.
            assert ended.wait(5)
    assert queued == alone and queued


def test_httpx_sse_reads_the_stream(server: Server) -> None:
    with (
        httpx.Client(timeout=60) as client,
        connect_sse(
            client, "POST", server.url + "/v1/chat/completions", json={**CHAT, "stream": True}
        ) as source,
    ):
        assert source.response.headers["content-type"].startswith("text/event-stream")
        events = list(source.iter_sse())
    assert events[-1].data == "[DONE]"
    chunks = [json.loads(e.data) for e in events[:-1]]
    assert all(e.event == "message" and e.id == "" for e in events)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_error_after_the_200_reaches_the_sdks_as_api_error(start_server: Callable[..., Server]) -> None:
    # A stream queued past LLM_QUEUE_TIMEOUT has already had its 200: the error is an event.
    server = start_server(LLM_PARALLEL="1", LLM_QUEUE_TIMEOUT="1", LLM_SSE_KEEPALIVE="0.3")
    with model_busy(server.port):
        raw = fetch(server.port, "POST", "/v1/completions", {**COMPLETION, "stream": True})
        assert raw.status == 200
        frames = raw.body.split(b"\n\n")
        assert frames[-1] == b"" and b"[DONE]" not in raw.body
        error = json.loads(frames[-2].removeprefix(b"data: "))
        assert set(error) == {"error"} and error["error"]["code"] == "queue_timeout"
        assert set(error["error"]) == {"message", "type", "code"}

        with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as client:
            stream = client.chat.completions.create(model=MODEL, **CHAT, stream=True)
            with pytest.raises(openai.APIError, match="waited"):
                list(stream)
            # Not streamed, the same wait is an ordinary 503 with Retry-After.
            with pytest.raises(openai.InternalServerError) as caught:
                client.chat.completions.create(model=MODEL, **CHAT)
            assert caught.value.status_code == 503
            assert caught.value.response.headers["retry-after"] == "1"

        async def read_async() -> None:
            async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as aclient:
                stream = await aclient.chat.completions.create(model=MODEL, **CHAT, stream=True)
                with pytest.raises(openai.APIError, match="waited"):
                    async for _ in stream:
                        pass

        asyncio.run(read_async())


def test_full_queue_is_429_before_any_byte(start_server: Callable[..., Server]) -> None:
    # Both sequences of the worker busy and no queue: a third request is refused at once.
    server = start_server(LLM_PARALLEL="2", LLM_MAX_QUEUE="0")
    with model_busy(server.port, sequences=2):
        for stream in (True, False):
            response = fetch(server.port, "POST", "/v1/chat/completions", {**CHAT, "stream": stream})
            assert response.status == 429 and response.header("retry-after") == "1"
            assert response.header("content-type") == "application/json"
            assert json.loads(response.body)["error"]["code"] == "queue_full"
        assert httpx.get(server.url + "/health").status_code == 200
    # Once the worker has seen the hang-up, the next request is admitted: no place leaked.
    status = wait_until(
        lambda: (code := fetch(server.port, "POST", "/v1/chat/completions", CHAT).status) != 429 and code,
        5,
        "the hung-up stream giving back its place",
    )
    assert status == 200


def test_disconnect_frees_the_model_at_once(start_server: Callable[..., Server]) -> None:
    server = start_server()
    sock = open_request(
        server.port,
        "POST",
        "/v1/completions",
        {"prompt": "1, 2, 3, 4,", "max_tokens": 1500, "temperature": 0, "stream": True},
    )
    reader = sock.makefile("rb")
    read_head(reader)
    for _ in range(5):
        read_chunk(reader)
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    left = time.monotonic()
    response = fetch(server.port, "POST", "/v1/completions", {**COMPLETION, "max_tokens": 1})
    # Generous: the abandoned stream alone would hold the model for ~15 s.
    assert response.status == 200 and time.monotonic() - left < 5
    log = wait_for_log(server, "cancelled by its client after")
    tokens = int(log.split("cancelled by its client after ")[1].split()[0])
    assert 0 < tokens < 200, tokens


def test_disconnect_aborts_prompt_processing(start_server: Callable[..., Server]) -> None:
    # A prompt alone is evaluated a batch a step: seven steps of 256 tokens, a hang-up heard after one.
    server = start_server(LLM_N_THREADS="1", LLM_N_BATCH="256", LLM_PROMPT_CACHE="0")
    body = {"prompt": "The quick brown fox jumps over the lazy dog. " * 180, "max_tokens": 1}  # ~1800 tokens
    started = time.monotonic()
    assert fetch(server.port, "POST", "/v1/completions", body).status == 200
    prompt_seconds = time.monotonic() - started  # several seconds on one thread

    sock = open_request(server.port, "POST", "/v1/completions", {**body, "stream": True})
    read_head(sock.makefile("rb"))
    wait_until(lambda: generations_in_flight(server) == 1, what="the prompt reaching the model")
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    left = time.monotonic()
    assert fetch(server.port, "POST", "/v1/completions", {**COMPLETION, "max_tokens": 1}).status == 200
    # The hang-up stopped the prompt at the end of a step: the model was free long before
    # the abandoned prompt would have finished.
    assert time.monotonic() - left < prompt_seconds / 3, (time.monotonic() - left, prompt_seconds)
    assert "during prompt processing" in wait_for_log(server, "cancelled by its client")


def test_client_that_leaves_the_queue_never_reaches_the_model(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="1")
    with model_busy(server.port):
        sock = open_request(server.port, "POST", "/v1/chat/completions", {**CHAT, "stream": True})
        read_head(sock.makefile("rb"))
        sock.close()
        assert "while queued; it never reached the model" in wait_for_log(server, "while queued")
    wait_for_log(server, "cancelled by its client", count=2)
