"""Continuous batching on the real server: streams side by side, joining, leaving, long prompts, KV full."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from harness.servers import Server
from tests.support.recorder import streams
from tests.support.waits import wait_for_log, wait_until

MODEL = "SmolLM2-135M-Instruct.Q4_1"


def story(index: int, max_tokens: int) -> dict:
    """A completion of its own prompt (no shared prefix), exactly `max_tokens` long."""
    return {"prompt": f"Tale {index}: {'xyzw'[index % 4]} once", "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream_options": {"include_usage": True}}  # fmt: skip


@pytest.fixture(scope="module")
def four() -> Iterator[Server]:
    """One worker of four sequences."""
    server = Server(LLM_PARALLEL="4", LLM_SSE_KEEPALIVE="1").wait_ready()
    yield server
    server.stop()


def test_eight_streams_on_one_worker_all_progress_and_health_answers_at_once(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(LLM_PARALLEL="8")
    running = streams(server.port, "/v1/completions", [story(i, 64) for i in range(8)])
    assert all(s.first_text.wait(60) for s in running)
    slowest = 0.0
    while not any(s.done.is_set() for s in running):
        started = time.monotonic()
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
        slowest = max(slowest, time.monotonic() - started)
    assert all(s.done.wait(120) for s in running)
    # Every stream had its first token before any stream finished: they ran side by side.
    assert max(s.text_times()[0] for s in running) < min(s.events[-1].at for s in running)
    assert all(s.usage()["completion_tokens"] == 64 and s.finish_reasons() == ["length"] for s in running)
    assert slowest < 1.0  # the hub never waits for llama.cpp (generous: a step takes ~50 ms)


def test_a_request_joins_the_running_batch_within_a_few_steps(four: Server) -> None:
    running = streams(four.port, "/v1/completions", [story(i, 300) for i in range(2)])
    assert all(s.first_text.wait(60) for s in running)
    (joining,) = streams(four.port, "/v1/completions", [story(7, 5)])
    before = len(running[0].events)
    assert joining.first_text.wait(60)
    steps_waited = len(running[0].events) - before
    assert steps_waited <= 10, steps_waited  # it joined the next steps, not the end of the others
    for s in running:
        s.hang_up()


def test_a_cancelled_stream_frees_its_sequence_for_a_queued_request(four: Server) -> None:
    running = streams(four.port, "/v1/completions", [story(i, 150) for i in range(4)])
    assert all(s.first_text.wait(60) for s in running)
    (queued,) = streams(four.port, "/v1/completions", [story(9, 5)])
    wait_until(lambda: len(running[0].events) > 10, what="the four streams going on")
    assert not queued.first_text.is_set()  # every sequence is busy: it waits
    leaving, staying = running[1], [running[0], running[2], running[3]]
    leaving.hang_up()
    assert queued.first_text.wait(30)
    assert all(s.done.wait(120) for s in staying)
    # The queued request started in the cancelled stream's place, before the others ended.
    assert queued.text_times()[0] < min(s.events[-1].at for s in staying)
    for s in staying:  # the other three went on to the end, intact
        assert s.usage()["completion_tokens"] == 150 and s.finish_reasons() == ["length"]
        assert s.errors() == []
    assert queued.done.wait(30) and queued.finish_reasons() == ["length"]
    wait_for_log(four, "cancelled by its client after")


def test_a_long_prompt_delays_running_streams_by_a_chunk_at_most(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="4", LLM_PREFILL_CHUNK="64", LLM_PROMPT_CACHE="0")
    long_prompt = {"prompt": "The quick brown fox jumps over the lazy dog. " * 150, "max_tokens": 1}  # ~1500
    started = time.monotonic()
    assert httpx.post(server.url + "/v1/completions", json=long_prompt, timeout=120).status_code == 200
    alone = time.monotonic() - started  # the whole prompt's evaluation, with nothing else running

    running = streams(server.port, "/v1/completions", [story(i, 400) for i in range(3)])
    assert all(s.first_text.wait(60) for s in running)
    (long,) = streams(server.port, "/v1/completions", [long_prompt])
    assert long.first_text.wait(120)
    window = (long.sent, long.text_times()[0])
    gaps = []
    for s in running:
        times = [t for t in s.text_times() if window[0] <= t <= window[1]]
        gaps += [b - a for a, b in zip(times, times[1:], strict=False)]
        s.hang_up()
    assert gaps, "the running streams sent nothing while the long prompt was evaluated"
    # In one piece, the prompt would have stopped them for about `alone`; in chunks of 64
    # tokens each pause is a small share of it.
    assert max(gaps) < alone / 3, (max(gaps), alone)


def test_n_choices_stream_side_by_side_and_equal_the_whole_answer(four: Server) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Name a fruit."}], "n": 3,
            "max_tokens": 12, "temperature": 0.9, "seed": 5}  # fmt: skip
    whole = httpx.post(four.url + "/v1/chat/completions", json=body, timeout=60).json()
    (streamed,) = streams(four.port, "/v1/chat/completions", [body])
    assert streamed.done.wait(60)
    by_index: dict[int, str] = {}
    for event in streamed.events:
        for choice in event.data["choices"]:
            by_index[choice["index"]] = by_index.get(choice["index"], "") + (
                choice["delta"].get("content") or ""
            )
    assert sorted(by_index) == [0, 1, 2]
    assert by_index == {c["index"]: c["message"]["content"] for c in whole["choices"]}
    assert sorted(streamed.finish_reasons()) == sorted(c["finish_reason"] for c in whole["choices"])


def test_json_schema_batched_with_free_text_still_parses(four: Server) -> None:
    properties = {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}}
    schema = {
        "type": "object",
        "properties": properties,
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    chatter = streams(four.port, "/v1/completions", [story(i, 120) for i in range(3)])
    assert all(s.first_text.wait(60) for s in chatter)
    body = {
        "messages": [{"role": "user", "content": "Invent a person."}],
        "max_tokens": 60,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
    }
    answer = httpx.post(four.url + "/v1/chat/completions", json=body, timeout=60).json()
    assert all(not s.done.is_set() for s in chatter)  # it really ran beside them
    person = json.loads(answer["choices"][0]["message"]["content"])
    assert set(person) == {"name", "age"} and isinstance(person["age"], int)
    for s in chatter:
        s.hang_up()


def test_a_second_chat_turn_is_served_from_the_cache(four: Server) -> None:
    first = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say a colour."}]
    one = httpx.post(four.url + "/v1/chat/completions", json={"messages": first, "max_tokens": 8}, timeout=60)
    turn = one.json()
    second = [*first, turn["choices"][0]["message"], {"role": "user", "content": "And another?"}]
    two = httpx.post(
        four.url + "/v1/chat/completions", json={"messages": second, "max_tokens": 8}, timeout=60
    )
    cached = two.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    # Everything of the first turn's prompt was in the cache; only the new turn was evaluated.
    assert cached >= turn["usage"]["prompt_tokens"], (cached, turn["usage"])
    assert cached < two.json()["usage"]["prompt_tokens"]
    metrics = httpx.get(four.url + "/metrics", timeout=10).text
    assert "llm_prompt_tokens_cached_total" in metrics


def test_the_same_request_alone_gives_the_same_text_streamed_or_not(four: Server) -> None:
    body = {"prompt": "My favourite animal is", "max_tokens": 30, "temperature": 0.7, "seed": 11}
    (first,) = streams(four.port, "/v1/completions", [body])
    assert first.done.wait(60)
    whole = httpx.post(four.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
    (again,) = streams(four.port, "/v1/completions", [body])  # its prompt is cached by now
    assert again.done.wait(60)
    assert first.text() == whole == again.text() and whole


def test_ignore_eos_and_min_tokens(four: Server) -> None:
    chat = {"messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
    short = httpx.post(four.url + "/v1/chat/completions", json={**chat, "max_tokens": 60}, timeout=60).json()
    assert short["choices"][0]["finish_reason"] == "stop"
    used = short["usage"]["completion_tokens"]
    pushed = httpx.post(
        four.url + "/v1/chat/completions", json={**chat, "max_tokens": 60, "min_tokens": used + 5}, timeout=60
    ).json()
    assert pushed["usage"]["completion_tokens"] >= used + 5
    forced = httpx.post(
        four.url + "/v1/chat/completions",
        json={**chat, "max_tokens": used + 7, "ignore_eos": True},
        timeout=60,
    ).json()
    assert (
        forced["usage"]["completion_tokens"] == used + 7 and forced["choices"][0]["finish_reason"] == "length"
    )
    too_many = httpx.post(
        four.url + "/v1/chat/completions", json={**chat, "max_tokens": 5, "min_tokens": 6}, timeout=60
    )
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "min_tokens"


def test_a_full_kv_cache_ends_one_choice_with_a_clear_error(start_server: Callable[..., Server]) -> None:
    # Four sequences share 512 cells: four 200-token answers cannot all fit.
    server = start_server(LLM_PARALLEL="4", LLM_N_CTX="512", LLM_KV_SIZE="512")
    running = streams(server.port, "/v1/completions", [story(i, 200) for i in range(4)])
    assert all(s.done.wait(120) for s in running)
    failed = [s for s in running if s.errors()]
    finished = [s for s in running if s.finish_reasons() == ["length"]]
    assert failed and finished and len(failed) + len(finished) == 4
    for s in failed:
        (error,) = s.errors()
        assert error["code"] == "kv_cache_full" and "LLM_KV_SIZE" in error["message"]
    assert all(s.usage()["completion_tokens"] == 200 for s in finished)
    whole = {name: value for name, value in story(5, 5).items() if name != "stream_options"}  # else a 400
    not_streamed = httpx.post(server.url + "/v1/completions", json=whole, timeout=60)
    assert not_streamed.status_code == 200  # the worker lives on, its sequences free again
    wait_for_log(server, "the KV cache is full")
