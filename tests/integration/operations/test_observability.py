"""Metrics across workers, API keys, request ids and access logs, JSON logs and CORS, on the real server."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import httpx
import openai
import pytest

from harness.servers import Server
from tests.support.busy import model_busy
from tests.support.prometheus import scrape, value
from tests.support.rawhttp import open_request, read_chunk, read_head
from tests.support.waits import wait_for_log, wait_until


def wait_until_idle(server: Server) -> None:
    """Until both workers have seen their streams' hang-ups and hold nothing."""
    wait_until(
        lambda: not (value(s := scrape(server), "llm_generations_in_flight") or value(s, "llm_queue_depth")),
        what="both workers going idle",
    )


def test_metrics_add_up_across_workers(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_PARALLEL="1", LLM_MAX_QUEUE="0")
    prompt_tokens = completion_tokens = 0
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for index in range(3):
            usage = client.post(
                "/v1/completions", json={"prompt": f"Story {index}:", "max_tokens": 5}
            ).json()["usage"]
            prompt_tokens += usage["prompt_tokens"]
            completion_tokens += usage["completion_tokens"]
        body = {"prompt": "Hi", "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True}}
        events = [
            line
            for line in client.post("/v1/completions", json=body).text.splitlines()
            if line.startswith("data: {")
        ]
        usage = json.loads(events[-1][6:])["usage"]
        prompt_tokens += usage["prompt_tokens"]
        completion_tokens += usage["completion_tokens"]
        assert client.post("/v1/completions", json={"prompt": 5}).status_code == 400
    # One rejection (both workers busy, no queue) and one cancellation.
    with model_busy(server.port), model_busy(server.port):
        assert httpx.post(server.url + "/v1/completions", json={"prompt": "x"}, timeout=30).status_code == 429
    wait_until_idle(server)
    sock = open_request(
        server.port, "POST", "/v1/completions", {"prompt": "1, 2,", "max_tokens": 900, "stream": True}
    )
    reader = sock.makefile("rb")
    read_head(reader)
    read_chunk(reader)
    sock.shutdown(socket.SHUT_RDWR)
    reader.close()
    sock.close()

    # Two busy streams and one hang-up were cancelled.
    samples = wait_until(
        lambda: value(s := scrape(server), "llm_cancelled_requests_total") >= 3 and s,
        what="three cancellations counted",
    )
    cancelled = value(samples, "llm_cancelled_requests_total")
    assert value(samples, "llm_requests_total", route="/v1/completions", status="200") >= 4 + 3
    assert value(samples, "llm_requests_total", route="/v1/completions", status="400") == 1
    assert value(samples, "llm_requests_total", route="/v1/completions", status="429") == 1
    assert value(samples, "llm_rejected_requests_total") == 1
    assert cancelled == 3
    # Tokens: the four answered requests, plus what the cancelled ones had generated.
    assert value(samples, "llm_prompt_tokens_total") >= prompt_tokens
    assert value(samples, "llm_completion_tokens_total") >= completion_tokens
    model = {"model": "SmolLM2-135M-Instruct.Q4_1"}  # latency histograms are per model
    assert value(samples, "llm_time_to_first_token_seconds_count", **model) >= 4
    assert value(samples, "llm_inter_token_latency_seconds_count", **model) >= completion_tokens - 4
    assert value(samples, "llm_e2e_request_latency_seconds_count", **model) >= 4
    assert value(samples, "llm_request_queue_seconds_count", **model) >= 4
    assert value(samples, "llm_time_per_output_token_seconds_count", **model) >= 4
    assert value(samples, "llm_model_load_seconds") > 0
    assert value(samples, "llm_queue_depth") == 0 and value(samples, "llm_generations_in_flight") == 0


def test_api_keys_on_the_live_server(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_API_KEYS="sk-live-1,sk-live-2")
    with openai.OpenAI(base_url=server.url + "/v1", api_key="sk-wrong", max_retries=0) as wrong:
        with pytest.raises(openai.AuthenticationError) as caught:
            wrong.models.list()
        assert caught.value.code == "invalid_api_key"
    with openai.OpenAI(base_url=server.url + "/v1", api_key="sk-live-2", max_retries=0) as right:
        reply = right.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", max_tokens=3, messages=[{"role": "user", "content": "Hi"}]
        )
        assert reply.choices[0].message.content is not None
    assert httpx.get(server.url + "/health", timeout=5).status_code == 200
    tokenize = httpx.post(server.url + "/tokenize", json={"content": "Hi"}, timeout=5)
    assert tokenize.status_code == 401 and tokenize.json()["error"]["code"] == "invalid_api_key"
    keyed = {"Authorization": "Bearer sk-live-1"}
    tokenize = httpx.post(server.url + "/tokenize", json={"content": "Hi"}, headers=keyed, timeout=5)
    assert tokenize.status_code == 200 and tokenize.json()["tokens"]
    assert "sk-live" not in server.output() and "sk-wrong" not in server.output()


def test_request_id_on_every_log_line_and_one_access_line(start_server: Callable[..., Server]) -> None:
    server = start_server()
    response = httpx.post(
        server.url + "/v1/completions",
        headers={"X-Request-ID": "trace-42"},
        json={"prompt": "Hi", "max_tokens": 3, "stream": True},
        timeout=30,
    )
    assert response.headers["x-request-id"] == "trace-42"
    log = wait_for_log(server, "[trace-42] app.access")
    lines = [line for line in log.splitlines() if "trace-42" in line]
    access = [line for line in lines if "app.access" in line]
    assert len(access) == 1, lines
    for field in ("route=/v1/completions", "status=200", "completion_tokens=3", "ttft=0.", "cancelled=False"):
        assert field in access[0], access[0]


def test_json_log_lines(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_LOG_FORMAT="json")
    httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=30)
    log = wait_for_log(server, '"route": "/v1/completions"')
    records = [json.loads(line) for line in log.splitlines() if line.strip()]
    access = [r for r in records if r["logger"] == "app.access" and r["route"] == "/v1/completions"]
    assert access and access[0]["status"] == 200 and access[0]["completion_tokens"] == 2
    assert any(r["logger"] == "gunicorn.error" for r in records)


def test_cors_preflight_and_stream_from_another_origin(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_CORS_ORIGINS="https://chat.example.com")
    origin = {"Origin": "https://chat.example.com"}
    preflight = httpx.options(
        server.url + "/v1/chat/completions",
        timeout=10,
        headers={
            **origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://chat.example.com"
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True}
    stream = httpx.post(server.url + "/v1/chat/completions", json=body, headers=origin, timeout=30)
    assert stream.headers["access-control-allow-origin"] == "https://chat.example.com"
    assert stream.text.endswith("data: [DONE]\n\n")
    other = httpx.post(
        server.url + "/v1/chat/completions",
        json=body,
        headers={"Origin": "https://evil.example.com"},
        timeout=30,
    )
    assert "access-control-allow-origin" not in other.headers
