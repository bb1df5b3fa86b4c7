"""The operators' status page and its JSON (/health/workers) on a real two-model server, in Chromium."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from app.settings.values import default_model_path
from harness.servers import Server

pytestmark = pytest.mark.external

MODELS = [
    {"id": "chat-a", "path": default_model_path(), "workers": 1},
    {"id": "chat-b", "path": default_model_path(), "workers": 1, "parallel": 2,
     "cache_type_k": "q8_0", "cache_type_v": "q8_0"},
]  # fmt: skip


def workers(server: Server) -> list[dict[str, Any]]:
    answer = httpx.get(server.url + "/health/workers", timeout=10)
    assert answer.status_code == 200
    return answer.json()["data"]


def tokens_last_minute(server: Server, model: str) -> int:
    return next(w for w in workers(server) if w["model"] == model)["tokens_last_minute"]


def test_each_worker_its_model_and_its_work(start_server: Callable[..., Server], page: Any) -> None:
    server = start_server(LLM_MODELS=json.dumps(MODELS), LLM_N_THREADS="1", LLM_BATCH_INVARIANT="0")
    listed = workers(server)
    assert sorted((w["model"], w["sequences"], w["ready"]) for w in listed) == [
        ("chat-a", 4, True),
        ("chat-b", 2, True),
    ]
    assert all(w["running"] == 0 and w["waiting"] == 0 and not w["generating"] for w in listed)
    kv = {w["model"]: w["kv_cache"] for w in listed}
    a, b = kv["chat-a"], kv["chat-b"]
    assert (a["type_k"], a["type_v"], a["cells"], b["type_k"], b["type_v"], b["cells"]) == (
        "f16", "f16", 4 * 2048, "q8_0", "q8_0", 2 * 2048
    )  # fmt: skip
    # SmolLM2: 30 layers x 3 KV heads x 64 values, keys and values; q8_0 stores 32 values in 34 bytes.
    assert kv["chat-a"]["bytes_per_sequence"] == 2048 * 30 * 2 * 192 * 2
    assert kv["chat-b"]["bytes_per_sequence"] == 2048 * 30 * 2 * 192 * 34 // 32

    page.goto(server.url + "/")  # the chat page offers every served model
    expect(page.locator("#model option")).to_have_text(["chat-a", "chat-b"])

    page.goto(server.url + "/status")
    rows = page.locator("#workers tr")
    expect(rows).to_have_count(2)
    b_row = rows.filter(has_text="chat-b")
    expect(b_row).to_have_attribute("data-state", "idle")
    # The model's end tokens banned: it generates for as long as it is let.
    ends = httpx.post(server.url + "/tokenize", json={"content": "<|endoftext|><|im_end|>"}, timeout=10)
    endless = {"model": "chat-b", "prompt": "Once upon a time", "temperature": 1,
               "logit_bias": {str(token): -100 for token in ends.json()["tokens"]}}  # fmt: skip
    streamed = {**endless, "max_tokens": 900, "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=streamed, timeout=60) as held:
        assert held.status_code == 200, held.read()
        # Kept in a name: a dropped line iterator is closed by the garbage collector, and httpx
        # then closes the connection, a hang-up the server answers by cancelling at once.
        lines = held.iter_lines()
        next(line for line in lines if line.startswith("data: {"))
        page.evaluate("refresh()")  # not waiting for the page's next 3-second tick
        expect(b_row).to_have_attribute("data-state", "generating")
        expect(b_row).to_contain_text("1 of 2")
        expect(rows.filter(has_text="chat-a")).to_have_attribute("data-state", "idle")
        expect(b_row.locator("td").nth(6)).to_have_text(f"{b['bytes'] / 2**20:.1f} MiB q8_0/q8_0")
        expect(b_row.locator("td").nth(7)).to_have_text("off")  # no speculative decoding by default
        expect(b_row.locator("td").nth(8)).to_have_text(re.compile(r"^\d+\.\d\d s$"))  # its load time
    # Hung up: the sequence is freed, and the page shows it at its next refresh.
    expect(b_row).to_have_attribute("data-state", "idle", timeout=15_000)

    before = tokens_last_minute(server, "chat-b")
    answer = httpx.post(server.url + "/v1/completions", json={**endless, "max_tokens": 24}, timeout=60)
    usage, generated = answer.json()["usage"], tokens_last_minute(server, "chat-b")
    assert before > 0 and generated - before == usage["completion_tokens"] == 24  # every token, no other
    page.evaluate("refresh()")
    expect(b_row.locator("td").nth(5)).to_have_text(f"{generated / 60:.1f}")
    assert tokens_last_minute(server, "chat-a") == 0


def test_the_pages_can_be_turned_off(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_UI="0", LLM_WORKERS="1")
    for path in ("/status", "/ui/chat.js"):
        answer = httpx.get(server.url + path, timeout=10)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["type"] == "invalid_request_error"
    root = httpx.get(server.url + "/", headers={"Accept": "text/html"}, timeout=10)
    assert (root.status_code, root.text) == (200, "Ollama is running")  # Ollama's answer, no page
    assert httpx.get(server.url + "/v1/models", timeout=10).status_code == 200
    assert len(workers(server)) == 1  # the figures stay for operators' tools


def test_the_pages_load_nothing_from_elsewhere(server: Server) -> None:
    for path in ("/", "/status"):
        page = httpx.get(server.url + path, timeout=10)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy
        for asset in (part.split('"')[0] for part in page.text.split('src="')[1:]):
            assert asset.startswith("/ui/"), asset  # shipped with the server
            assert httpx.get(server.url + asset, timeout=10).status_code == 200, asset
