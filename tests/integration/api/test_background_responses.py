"""Background responses through the openai SDK: polled, resumed after a hang-up, cancelled; on both stores."""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

import httpx
import openai
import pytest

from harness.servers import Server
from tests.integration.conftest import store_sdk as sdk

MODEL = "SmolLM2-135M-Instruct.Q4_1"
# A grammar that cannot end before a thousand numbers: the generation runs for many seconds.
LONG = {
    "input": "List numbers.",
    "text": {"format": {"type": "json_schema", "name": "numbers", "schema": {
        "type": "object", "required": ["n"],
        "properties": {"n": {"type": "array", "items": {"type": "integer"}, "minItems": 1000}}}}},
    "max_output_tokens": 1900,
}  # fmt: skip


def _finished(client: openai.OpenAI, response_id: str, timeout: float = 120) -> Any:
    """Poll as a client of a background response does, until it is no longer queued or running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        time.sleep(0.2)
    raise AssertionError(f"{response_id} still {response.status} after {timeout} s")


def _text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def test_a_background_response_is_polled_to_completion(store_server: Server) -> None:
    client = sdk(store_server)
    created = client.responses.create(model=MODEL, input="Say hello.", background=True, max_output_tokens=8)
    assert created.background is True and created.status == "queued" and created.output == []
    done = _finished(client, created.id)
    assert done.status in ("completed", "incomplete") and done.output_text
    assert done.usage is not None and done.usage.output_tokens > 0


def test_a_hang_up_does_not_stop_it_and_the_stream_resumes_where_it_was_left(store_server: Server) -> None:
    client = sdk(store_server)
    seen = []
    stream = client.responses.create(
        model=MODEL,
        input="Write a short poem about rivers.",
        background=True,
        stream=True,
        max_output_tokens=60,
    )
    for event in stream:
        seen.append(event)
        if event.type == "response.output_text.delta":
            break  # the client goes away mid-stream
    stream.close()
    response_id = seen[0].response.id
    done = _finished(client, response_id)  # it went on without anyone connected
    resumed = list(
        client.responses.retrieve(response_id, stream=True, starting_after=seen[-1].sequence_number)
    )
    numbers = [e.sequence_number for e in seen + resumed]
    assert numbers == list(range(len(numbers)))  # nothing lost, nothing twice
    assert resumed[-1].type in ("response.completed", "response.incomplete")
    assert _text(seen + resumed) == done.output_text
    replayed = list(client.responses.retrieve(response_id, stream=True))  # from the start
    assert [e.sequence_number for e in replayed] == numbers


def test_a_cancel_stops_the_generation_and_frees_its_sequence(store_server: Server) -> None:
    client = sdk(store_server)
    created = client.responses.create(model=MODEL, background=True, **LONG)
    with client.responses.retrieve(created.id, stream=True, starting_after=1) as events:
        assert next(iter(events)).type == "response.output_item.added"  # it is generating now
    cancelled = client.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    assert _finished(client, created.id).status == "cancelled"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _running(store_server) > 0:
        time.sleep(0.2)
    assert _running(store_server) == 0
    assert _finished(client, created.id).status == "cancelled"  # the run's last word did not undo it
    replayed = list(client.responses.retrieve(created.id, stream=True))  # ends, rather than waiting for ever
    assert replayed and not [e for e in replayed if e.type in ("response.completed", "response.incomplete")]


def _running(server: Server) -> float:
    text = httpx.get(server.url + "/metrics", headers={"Authorization": "Bearer key-alice"}, timeout=10).text
    match = re.search(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    assert match, text[:2000]
    return float(match[1])


def test_another_key_cannot_poll_resume_or_cancel_it(store_server: Server) -> None:
    alice, bob = sdk(store_server), sdk(store_server, "key-bob")
    created = alice.responses.create(model=MODEL, input="Hi.", background=True, max_output_tokens=4)
    for ask in (
        lambda: bob.responses.retrieve(created.id),
        lambda: list(bob.responses.retrieve(created.id, stream=True)),
        lambda: bob.responses.cancel(created.id),
    ):
        with pytest.raises(openai.NotFoundError):
            ask()
    _finished(alice, created.id)


def test_what_a_background_response_needs_is_said(store_server: Server) -> None:
    client = sdk(store_server)
    with pytest.raises(openai.BadRequestError) as unkept:
        client.responses.create(model=MODEL, input="Hi.", background=True, store=False)
    assert unkept.value.body["param"] == "background"
    foreground = client.responses.create(model=MODEL, input="Hi.", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError) as not_background:
        client.responses.cancel(foreground.id)
    assert "Only a background response" in not_background.value.body["message"]


def _generating(client: openai.OpenAI, response_id: str) -> None:
    """Until its first output item has been written: the run is under way."""
    with client.responses.retrieve(response_id, stream=True, starting_after=1) as events:
        assert next(iter(events)).type == "response.output_item.added"


def test_a_stopping_server_finishes_its_background_responses_first(store_backend: dict[str, str]) -> None:
    server = Server(LLM_WORKERS="1", LLM_GRACEFUL_TIMEOUT="120", **store_backend).wait_ready()
    try:
        client = sdk(server)
        numbers = {**LONG, "max_output_tokens": 300}
        created = client.responses.create(model=MODEL, background=True, **numbers)
        _generating(client, created.id)
        server.process.send_signal(signal.SIGTERM)  # to gunicorn's master, as systemd or a kubelet does
        assert server.process.wait(timeout=150) == 0  # after the run: its sequence held the drain
    finally:
        server.stop()
    again = Server(LLM_WORKERS="1", LLM_DATA_DIR=server.env["LLM_DATA_DIR"], **store_backend).wait_ready()
    try:
        done = sdk(again).responses.retrieve(created.id)
        assert done.status in ("completed", "incomplete") and done.usage is not None
        assert done.usage.output_tokens > 0
    finally:
        again.stop()


def test_a_background_response_whose_worker_died_reads_failed(store_backend: dict[str, str]) -> None:
    server = Server(LLM_WORKERS="1", LLM_MAX_GENERATION_SECONDS="3", LLM_QUEUE_TIMEOUT="1", **store_backend)
    server.wait_ready()
    try:
        client = sdk(server)
        created = client.responses.create(model=MODEL, background=True, **LONG)
        _generating(client, created.id)
        worker = server.pids()[1]
        os.kill(worker, signal.SIGKILL)  # its run dies with it, mid-generation
        lost = _finished(client, created.id, timeout=90)
        assert lost.status == "failed" and lost.error is not None
        assert "stopped before it finished" in lost.error.message
        assert list(client.responses.retrieve(created.id, stream=True))  # the stream ends too
    finally:
        server.stop()
