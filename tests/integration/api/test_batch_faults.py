"""Batches against faults: a worker killed, the server stopped and killed, interactive work, racing claims.

Each line in flight when its worker dies runs again on another (its lease runs out),
and no line is lost or answered twice; interactive requests take sequences back from
batch lines. Both stores.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion

from app.store import migrate
from app.store.batch_lines import BatchLines
from app.store.batches import BatchStore
from app.store.database import open_engine
from harness.servers import Server
from tests.integration.conftest import store_sdk as sdk
from tests.support.batches import finished, jsonl, results
from tests.support.waits import generations_in_flight, wait_for_log, wait_until

CHAT = "/v1/chat/completions"
KILLED_AGAIN = "runs again (attempt 2)"


def story_lines(count: int, tokens: int) -> bytes:
    return jsonl([
        {"custom_id": f"line-{n}", "method": "POST", "url": CHAT,
         "body": {"messages": [{"role": "user", "content": f"Tell story {n}."}], "max_tokens": tokens,
                  "ignore_eos": True}}
        for n in range(count)
    ])  # fmt: skip


def server(store: dict[str, str], data_dir: str, **env: str) -> Server:
    settings = {"LLM_WORKERS": "2", "LLM_N_THREADS": "1", "LLM_BATCH_LEASE": "3", "LLM_DATA_DIR": data_dir}
    return Server(**{**settings, **store, **env}).wait_ready()


def completed(client: openai.OpenAI, batch_id: str, at_least: int) -> int:
    batch = finished(client, batch_id, until=lambda b: b.request_counts is not None
                     and b.request_counts.completed >= at_least)  # fmt: skip
    assert batch.request_counts is not None
    return batch.request_counts.completed


def each_line_once(client: openai.OpenAI, batch_id: str, count: int) -> None:
    done = finished(client, batch_id)
    assert done.status == "completed" and done.error_file_id is None, done
    answered = [line["custom_id"] for line in results(client, done.output_file_id)]
    assert sorted(answered) == sorted(f"line-{n}" for n in range(count))  # each once, none lost
    assert all(line["response"]["body"]["usage"]["completion_tokens"] > 0
               for line in results(client, done.output_file_id))  # fmt: skip


@pytest.fixture
def data_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="test-batch-data-") as path:
        yield path


def test_a_killed_worker_loses_no_line(store_backend: dict[str, str], data_dir: str) -> None:
    instance = server(store_backend, data_dir)
    try:
        client = sdk(instance)
        batch_file = client.files.create(file=("s.jsonl", story_lines(16, 40)), purpose="batch")
        batch = client.batches.create(input_file_id=batch_file.id, endpoint=CHAT, completion_window="24h")
        completed(client, batch.id, 2)  # lines run on both workers now
        os.kill(instance.pids()[1], signal.SIGKILL)
        wait_for_log(instance, KILLED_AGAIN, timeout=60)  # a line it held, once its lease ran out
        each_line_once(client, batch.id, 16)
    finally:
        instance.stop()


def test_a_batch_survives_a_stop_and_a_kill_of_the_server(
    store_backend: dict[str, str], data_dir: str
) -> None:
    first = server(store_backend, data_dir)
    try:
        client = sdk(first)
        batch_file = client.files.create(file=("s.jsonl", story_lines(24, 40)), purpose="batch")
        batch_id = client.batches.create(
            input_file_id=batch_file.id, endpoint=CHAT, completion_window="24h"
        ).id
        completed(client, batch_id, 2)
    finally:
        first.stop()  # SIGTERM: the lines in flight finish, no new ones start
    second = server(store_backend, data_dir)
    try:
        client = sdk(second)
        after_stop = client.batches.retrieve(batch_id)
        assert after_stop.status == "in_progress" and after_stop.request_counts is not None
        completed(client, batch_id, after_stop.request_counts.completed + 2)  # this server runs lines
        os.killpg(second.process.pid, signal.SIGKILL)  # the whole server, mid-line
        second.process.wait(timeout=10)
    finally:
        second.stop()
    third = server(store_backend, data_dir)
    try:
        client = sdk(third)
        wait_for_log(third, KILLED_AGAIN, timeout=60)
        each_line_once(client, batch_id, 24)
    finally:
        third.stop()


def test_interactive_requests_take_sequences_back_from_a_batch(
    store_backend: dict[str, str], data_dir: str
) -> None:
    # One worker, two sequences: the batch may use one (one is kept free), and a second
    # interactive request takes the batch's.
    instance = server(store_backend, data_dir, LLM_WORKERS="1", LLM_PARALLEL="2")
    try:
        client = sdk(instance)
        batch_file = client.files.create(file=("s.jsonl", story_lines(3, 300)), purpose="batch")
        batch = client.batches.create(input_file_id=batch_file.id, endpoint=CHAT, completion_window="24h")
        wait_until(lambda: generations_in_flight(instance) >= 1, timeout=60, what="a batch line running")
        model = client.models.list().data[0].id

        def ask(n: int) -> ChatCompletion:
            return client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"Hi {n}"}], max_tokens=60,
                extra_body={"ignore_eos": True},
            )  # fmt: skip

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(ask, range(2)))
        assert all(answer.usage and answer.usage.completion_tokens == 60 for answer in answers)
        wait_for_log(instance, "makes way for an interactive one", timeout=1)
        wait_for_log(instance, "goes back to the queue unanswered", timeout=10)
        each_line_once(client, batch.id, 3)
    finally:
        instance.stop()


def _claim_all(url: str, worker: str, start: Any) -> list[int]:
    """In a process of its own, as a worker: claim and answer lines until none is left."""
    engine = open_engine(url)
    lines, taken = BatchLines(engine), []
    start.wait()  # every worker ready: they claim side by side
    while (line := lines.claim(worker, 30, ("m",))) is not None:
        assert lines.finish(line, worker, {"by": worker}, failed=False)
        taken.append(line.line_no)
    engine.dispose()
    return taken


def test_workers_claiming_at_once_never_share_a_line(store_backend: dict[str, str], data_dir: str) -> None:
    url = store_backend.get("LLM_STORE_URL") or f"sqlite:///{data_dir}/claims.sqlite3"
    migrate.upgrade(url)
    engine = open_engine(url)
    batches, lines = BatchStore(engine), BatchLines(engine)
    batch_id = str(batches.create("", CHAT, "file-1", None, None)["id"])
    lines.add(batch_id, [{"line_no": n, "custom_id": f"c{n}", "model": "", "body": {}, "result": None}
                         for n in range(400)])  # fmt: skip
    assert batches.change(batch_id, "validating", "in_progress")
    spawn = multiprocessing.get_context("spawn")
    with spawn.Manager() as manager, ProcessPoolExecutor(4, mp_context=spawn) as pool:
        start = manager.Barrier(4)
        taken = list(pool.map(_claim_all, [url] * 4, [f"w{n}" for n in range(4)], [start] * 4))
    claimed = [line_no for worker in taken for line_no in worker]
    assert sorted(claimed) == list(range(400))  # every line, each by one worker
    assert sum(1 for worker in taken if worker) >= 2  # they did run side by side
    assert len(list(lines.results(batch_id, failed=False))) == 400
    engine.dispose()
