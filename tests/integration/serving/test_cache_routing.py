"""Cache-aware routing on two real workers: a conversation's next turn goes where its history is cached."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from harness.servers import Server
from tests.support import tiny_models
from tests.support.exactness import complete, complete_ids, tokens_of
from tests.support.waits import wait_until

SYSTEM = (
    "You are a patient tutor. Explain things in short sentences, give one example each time, and "
    "finish with a question that checks the student understood. " * 6
)  # about 200 tokens: three whole blocks of 64 before the first user turn


def served_by(server: Server, request_id: str) -> int:
    """The pid of the worker whose access line carries `request_id` (the worker that served it)."""
    pattern = re.compile(rf"\[(\d+)\] \[INFO\] \[{request_id}\] app\.access")

    def found() -> int | None:
        match = pattern.search(server.output())
        return int(match.group(1)) if match else None

    slot = wait_until(found, timeout=30, what=f"the access line of {request_id}")
    assert slot is not None
    return slot


def connection_to(server: Server, pid: int, other: bool) -> httpx.Client:
    """A keep-alive connection that gunicorn gave to the worker `pid` (or, `other`, to another)."""
    for _ in range(40):
        client = httpx.Client(base_url=server.url, timeout=120)
        request_id = uuid.uuid4().hex
        client.get("/v1/models", headers={"X-Request-ID": request_id})
        if (served_by(server, request_id) != pid) == other:
            return client
        client.close()
    raise AssertionError("gunicorn never gave a connection to the wanted worker")


def turn(client: httpx.Client, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
    request_id = uuid.uuid4().hex
    body = {"messages": messages, "max_tokens": 24, "temperature": 0}
    answer = client.post("/v1/chat/completions", json=body, headers={"X-Request-ID": request_id})
    assert answer.status_code == 200, answer.text
    return request_id, answer.json()


@pytest.mark.parametrize("routing", ["1", "0"])
def test_the_next_turn_lands_where_the_history_is_cached(
    start_server: Callable[..., Server], routing: str
) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_ROUTE_BY_CACHE=routing)
    with httpx.Client(base_url=server.url, timeout=120) as first:
        conversations = first_turns(server, first)
        holder = served_by(server, conversations[0][0])
        assert {served_by(server, request_id) for request_id, _ in conversations} == {holder}
    # Every next turn arrives at the other worker.
    elsewhere = connection_to(server, holder, other=True)
    try:
        for _, messages in conversations:
            request_id, answer = turn(elsewhere, messages)
            cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
            if routing == "1":
                assert served_by(server, request_id) == holder
                assert cached >= 128, answer["usage"]  # the history, but where the answer re-tokenizes
            else:
                assert served_by(server, request_id) != holder and cached == 0
    finally:
        elsewhere.close()
    relays = server.output().count("whose cache holds")
    assert relays == (3 if routing == "1" else 0)


def first_turns(server: Server, client: httpx.Client) -> list[tuple[str, list[dict[str, str]]]]:
    """Three conversations' first turns, on one connection (so one worker); each ready for its next."""
    conversations = []
    for topic in ("a noun", "gravity", "a prime number"):
        # A system prompt of its own: the only cache it can hit is its own history.
        system = f"Today's topic is {topic}. {SYSTEM}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": f"What is {topic}?"}]
        request_id, answer = turn(client, messages)
        messages.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
        messages.append({"role": "user", "content": "Give me another example, please."})
        conversations.append((request_id, messages))
    return conversations


@pytest.mark.parametrize("kind", ["mamba2", "gpt-oss"])
def test_a_next_turn_on_a_recurrent_or_window_memory_goes_where_it_resumes_and_answers_as_fresh(
    start_server: Callable[..., Server], kind: str
) -> None:
    # Each worker publishes only the blocks a prompt can resume into on its memory (a recurrent
    # state's checkpoints and its whole length; a window's live cells): enough to find the history.
    # In token ids: the next turn extends exactly what the cells hold (a random-weight model's
    # answer need not tokenize back to the ids it generated). The window of window size, as
    # llama-server's (LLM_SWA_FULL=0), since a full-size one is plain memory.
    path, window = str(tiny_models.path(kind)), {"LLM_SWA_FULL": "0"}
    text = " ".join(["lantern orchard meadow river stone bridge harbour"] * 40)
    plain = start_server(
        LLM_MODEL_PATH=path, LLM_WORKERS="1", LLM_PROMPT_CACHE="0", LLM_CACHE_RAM_MB="0", **window
    )
    history = tokens_of(plain.url, text, first=True)
    _, answer_ids = complete_ids(plain.url, history, 40)
    next_turn = history + answer_ids + tokens_of(plain.url, " And the next morning", first=False)
    fresh = complete(plain.url, next_turn, 40)[0].text
    server = start_server(LLM_MODEL_PATH=path, LLM_WORKERS="2", LLM_N_THREADS="1", **window)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        request_id = uuid.uuid4().hex
        first_turn = {"prompt": history, "n_predict": 40, "temperature": 0, "return_tokens": True}
        again = client.post("/completion", json=first_turn, headers={"X-Request-ID": request_id}).json()
        assert again["tokens"] == answer_ids
        holder = served_by(server, request_id)
    elsewhere = connection_to(server, holder, other=True)
    try:
        request_id = uuid.uuid4().hex
        body = {"prompt": next_turn, "max_tokens": 40, "temperature": 0}
        answer = elsewhere.post("/v1/completions", json=body, headers={"X-Request-ID": request_id}).json()
    finally:
        elsewhere.close()
    assert served_by(server, request_id) == holder
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] > 200
    assert answer["choices"][0]["text"] == fresh


def test_requests_sharing_a_prompt_cache_key_are_served_by_one_worker(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(LLM_WORKERS="2", LLM_N_THREADS="1")
    with httpx.Client(base_url=server.url, timeout=120) as probe:
        request_id = uuid.uuid4().hex
        probe.get("/v1/models", headers={"X-Request-ID": request_id})
        one = served_by(server, request_id)
    connections = [connection_to(server, one, other=False), connection_to(server, one, other=True)]
    clients = [openai.OpenAI(base_url=server.url + "/v1", api_key="none", http_client=c) for c in connections]
    try:
        model = clients[0].models.list().data[0].id
        for key in ("alpha", "beta", "gamma", "delta"):
            served = set()
            for n, client in enumerate(clients):  # each arrives at both workers
                request_id = uuid.uuid4().hex
                asked = [{"role": "user", "content": f"Say {key} {n} times."}]
                client.chat.completions.create(
                    model=model, messages=asked, max_tokens=2, prompt_cache_key=key,
                    extra_headers={"X-Request-ID": request_id},
                )  # fmt: skip
                served.add(served_by(server, request_id))
                request_id = uuid.uuid4().hex
                response = client.responses.create(
                    model=model, input=f"Spell {key}.", max_output_tokens=2, prompt_cache_key=key,
                    extra_headers={"X-Request-ID": request_id},
                )  # fmt: skip
                assert response.prompt_cache_key == key
                served.add(served_by(server, request_id))
            assert len(served) == 1, (key, served)
    finally:
        for client in clients:
            client.close()
    assert server.output().count("its prompt_cache_key's home") >= 4  # half the requests came to the other
