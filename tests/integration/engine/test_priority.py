"""vLLM's `priority` on a busy worker: waiting requests start lowest value first, then in arrival order,
whether the body says it or a gateway's header (LLM_PRIORITY_HEADER) does; the running stream is
never cut for them; out-of-range values are 400s naming the field or the header."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.servers import Server
from tests.support.busy import model_busy
from tests.support.waits import wait_until

HEADER = "X-Gateway-Priority"


@pytest.fixture(scope="module")
def one_sequence() -> Iterator[Server]:
    server = Server(LLM_WORKERS="1", LLM_PARALLEL="1", LLM_PRIORITY_HEADER=HEADER).wait_ready()
    yield server
    server.stop(wait=False)


def queue_depth(server: Server) -> float:
    for line in httpx.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("llm_queue_depth "):
            return float(line.split()[1])
    return 0.0


def test_waiting_requests_start_by_priority_then_arrival(one_sequence: Server) -> None:
    finished: list[str] = []
    asked: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        ("low", {"priority": 5}, {}),
        ("default", {}, {}),
        ("urgent by body", {"priority": -5}, {}),
        ("urgent by header", {"priority": 9}, {HEADER: "-5"}),  # the gateway's header wins
        ("also low", {"priority": 5}, {}),
    ]

    def ask(name: str, fields: dict[str, Any], headers: dict[str, str]) -> None:
        body = {"prompt": "Count:", "max_tokens": 2, "temperature": 0, **fields}
        answer = httpx.post(one_sequence.url + "/v1/completions", json=body, headers=headers, timeout=120)
        assert answer.status_code == 200, answer.text
        finished.append(name)

    threads = []
    with model_busy(one_sequence.port) as ended:
        for waiting, (name, fields, headers) in enumerate(asked, start=1):
            threads.append(threading.Thread(target=ask, args=(name, fields, headers)))
            threads[-1].start()
            wait_until(lambda waiting=waiting: queue_depth(one_sequence) == waiting, 30, f"{waiting} waiting")
        assert not ended.is_set()  # the running stream was not cut for any of them
    for thread in threads:
        thread.join(120)
    # One sequence: each finishes before the next starts, so the finishing order is the start order.
    assert finished == ["urgent by body", "urgent by header", "default", "low", "also low"]


@pytest.mark.parametrize(
    ("fields", "headers", "param"),
    [
        ({"priority": 5000}, {}, "priority"),
        ({"priority": 1.5}, {}, "priority"),
        ({}, {HEADER: "soon"}, HEADER),
        ({}, {HEADER: "-2000"}, HEADER),
    ],
)
def test_a_priority_out_of_range_is_a_400_naming_it(
    one_sequence: Server, fields: dict[str, Any], headers: dict[str, str], param: str
) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, **fields}
    answer = httpx.post(one_sequence.url + "/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
