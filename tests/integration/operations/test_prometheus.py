"""A real Prometheus scrapes a two-worker server under load; every query of the Grafana dashboard answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.servers import ROOT, Server, prometheus
from tests.support.waits import wait_until

pytestmark = pytest.mark.external

DASHBOARD = ROOT / "deploy" / "grafana" / "llm-server.json"
KEYS = "alice sk-alice-p1\nbob sk-bob-p2 rpm=6\n"
SCRAPES = 'sum_over_time(up{job="llm-server"}[10m])'  # the scrapes that succeeded


# Queries of vLLM's Grafana dashboard (examples/online_serving/prometheus_grafana/grafana.json),
# with its model variable filled in: its panels read this server's vLLM-named series.
MODEL = 'model_name="SmolLM2-135M-Instruct.Q4_1"'
VLLM_DASHBOARD = [
    f"histogram_quantile(0.99, sum by(le) (rate(vllm:e2e_request_latency_seconds_bucket{{{MODEL}}}[1m])))",
    f"histogram_quantile(0.99, sum by(le) (rate(vllm:time_to_first_token_seconds_bucket{{{MODEL}}}[1m])))",
    f"histogram_quantile(0.99, sum by(le) (rate(vllm:inter_token_latency_seconds_bucket{{{MODEL}}}[1m])))",
    f"histogram_quantile(0.5, sum by(le) (rate(vllm:request_queue_time_seconds_bucket{{{MODEL}}}[1m])))",
    f"histogram_quantile(0.5, sum by(le) (rate(vllm:request_prefill_time_seconds_bucket{{{MODEL}}}[1m])))",
    f"histogram_quantile(0.5, sum by(le) (rate(vllm:request_decode_time_seconds_bucket{{{MODEL}}}[1m])))",
    f"rate(vllm:prompt_tokens_total{{{MODEL}}}[1m])",
    f"rate(vllm:generation_tokens_total{{{MODEL}}}[1m])",
    f"sum by(finished_reason) (increase(vllm:request_success_total{{{MODEL}}}[1m]))",
    f"sum by(le) (increase(vllm:request_prompt_tokens_bucket{{{MODEL}}}[1m]))",
    f"sum by(le) (increase(vllm:request_generation_tokens_bucket{{{MODEL}}}[1m]))",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
]


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the dashboard, with Grafana's rate window filled in."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"].replace("$__rate_interval", "1m") for p in panels for target in p["targets"]]


def query(prom: Any, expr: str) -> list[dict[str, Any]]:
    answer = httpx.get(prom.url + "/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


def total(prom: Any, expr: str) -> float:
    return sum(float(series["value"][1]) for series in query(prom, expr))


def load(server: Server) -> tuple[int, int]:
    """Mixed traffic from two keys; the prompt and completion tokens the clients were told of."""
    alice, bob = ({"Authorization": f"Bearer {key}"} for key in ("sk-alice-p1", "sk-bob-p2"))

    def one(index: int) -> tuple[int, int]:
        headers = bob if index % 3 == 0 else alice
        body: dict[str, Any] = {"prompt": f"Fact {index}:", "max_tokens": 6 + index % 5, "temperature": 0}
        path = "/v1/completions"
        if index % 2:
            body = {"messages": [{"role": "user", "content": f"Say {index}."}], "max_tokens": 8}
            path = "/v1/chat/completions"
        if index % 4 == 1:
            body.update(stream=True, stream_options={"include_usage": True})
        answer = httpx.post(server.url + path, json=body, headers=headers, timeout=120)
        if answer.status_code != 200:
            assert answer.status_code == 429 and headers is bob, answer.text  # bob's 6 a minute
            return 0, 0
        if body.get("stream"):
            last = [line for line in answer.text.splitlines() if line.startswith('data: {"')][-1]
            usage = json.loads(last[6:])["usage"]
        else:
            usage = answer.json()["usage"]
        return usage["prompt_tokens"], usage["completion_tokens"]

    with ThreadPoolExecutor(4) as pool:
        told = list(pool.map(one, range(36)))
    assert httpx.post(server.url + "/v1/completions", json={"prompt": 5}, headers=alice).status_code == 400
    return sum(p for p, _ in told), sum(c for _, c in told)


@pytest.mark.timeout(300)
def test_prometheus_scrapes_and_every_dashboard_query_answers(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEYS)
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_API_KEYS_FILE=str(keys))
    prom = prometheus([f"127.0.0.1:{server.port}"])
    try:
        wait_until(lambda: total(prom, 'up{job="llm-server"}') == 1, 60, "Prometheus scraping the server")
        prompt, completion = load(server)
        # The counters Prometheus scraped agree with what the clients were told, token for token.
        wait_until(
            lambda: total(prom, "sum(llm_completion_tokens_total)") == completion, 60, "the last scrape"
        )
        assert total(prom, "sum(llm_prompt_tokens_total)") == prompt
        per_key = "sum(llm_key_prompt_tokens_total) + sum(llm_key_completion_tokens_total)"
        assert total(prom, per_key) == prompt + completion
        assert total(prom, 'sum(llm_key_requests_total{key="bob",status="429"})') >= 1
        # rate() answers only from two samples: a series the last requests made (the 400, late
        # 429s) needs two more scrapes that succeeded, which a busy machine may take a while to get.
        scraped = total(prom, SCRAPES)
        wait_until(lambda: total(prom, SCRAPES) >= scraped + 2, 60, "two scrapes after the traffic")
        empty = [expr for expr in dashboard_queries() if not query(prom, expr)]
        assert not empty, f"dashboard queries without data: {empty}"
        # vLLM's and llama-server's names count what ours count, and vLLM's dashboard reads them.
        assert total(prom, "sum(vllm:prompt_tokens_total)") == prompt
        assert total(prom, "sum(vllm:generation_tokens_total)") == completion
        assert total(prom, "sum(llamacpp:tokens_predicted_total)") == completion
        llama_prompt = "sum(llamacpp:prompt_tokens_total) + sum(llamacpp:prompt_tokens_cached_total)"
        assert total(prom, llama_prompt) == prompt
        assert total(prom, "sum(llamacpp:n_decode_total)") >= completion / 4  # steps batch several streams
        empty = [expr for expr in VLLM_DASHBOARD if not query(prom, expr)]
        assert not empty, f"vLLM dashboard queries without data: {empty}"
    finally:
        prom.stop()
