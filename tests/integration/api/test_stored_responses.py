"""Stored responses through the openai SDK, unchanged, on SQLite and on a real PostgreSQL server.

Two gunicorn workers share each store (every worker writes), two API keys share each
server (each sees only its own responses).
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
import openai
import pytest
import sqlalchemy

from harness.servers import Server
from tests.integration.conftest import store_sdk as sdk

MODEL = "SmolLM2-135M-Instruct.Q4_1"


def test_a_stored_response_is_retrieved_listed_and_deleted(store_server: Server) -> None:
    client = sdk(store_server)
    created = client.responses.create(model=MODEL, input="Say hello.", max_output_tokens=8, temperature=0)
    assert created.to_dict()["store"] is True
    again = client.responses.retrieve(created.id)
    assert again.model_dump() == created.model_dump()
    items = client.responses.input_items.list(created.id)
    assert [(i.type, i.role, i.content[0].text) for i in items.data] == [("message", "user", "Say hello.")]
    assert items.data[0].id.startswith("msg_")
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.retrieve(created.id)
    assert gone.value.body["message"] == f"Response with id '{created.id}' not found."


def test_a_streamed_response_is_stored_as_it_was_streamed(store_server: Server) -> None:
    client = sdk(store_server)
    events = list(
        client.responses.create(model=MODEL, input="Count to three.", max_output_tokens=10, stream=True)
    )
    assert events[-1].type in ("response.completed", "response.incomplete")
    final = events[-1].response
    kept = client.responses.retrieve(final.id)
    assert kept.output_text == final.output_text and kept.status == final.status
    assert kept.usage is not None and kept.usage.output_tokens == final.usage.output_tokens


def test_three_turns_by_previous_response_id_carry_the_whole_conversation(store_server: Server) -> None:
    client = sdk(store_server)
    turns = ["My name is Ada.", "I live in Paris.", "What is my name?"]
    previous: Any = None
    responses = []
    for text in turns:
        previous = client.responses.create(
            model=MODEL, input=text, previous_response_id=previous.id if previous else None,
            max_output_tokens=8, temperature=0,
        )  # fmt: skip
        responses.append(previous)
    assert responses[2].previous_response_id == responses[1].id
    # The third turn's prompt is the whole conversation, written out: the same token count.
    written_out = []
    for text, response in zip(turns, responses, strict=True):
        written_out.append({"role": "user", "content": text})
        written_out.append({"role": "assistant", "content": response.output_text})
    counted = client.responses.input_tokens.count(model=MODEL, input=written_out[:-1])
    assert responses[2].usage is not None
    assert responses[2].usage.input_tokens == counted.input_tokens
    # Its input items are its own turn's only, as OpenAI lists them.
    items = client.responses.input_items.list(responses[2].id)
    assert [i.content[0].text for i in items.data] == ["What is my name?"]


def test_another_key_finds_nothing(store_server: Server) -> None:
    alice, bob = sdk(store_server), sdk(store_server, "key-bob")
    created = alice.responses.create(model=MODEL, input="A secret.", max_output_tokens=4)
    for ask in (
        lambda: bob.responses.retrieve(created.id),
        lambda: bob.responses.delete(created.id),
        lambda: bob.responses.input_items.list(created.id),
    ):
        with pytest.raises(openai.NotFoundError):
            ask()
    with pytest.raises(openai.BadRequestError) as caught:
        bob.responses.create(model=MODEL, input="More.", previous_response_id=created.id)
    assert caught.value.body["code"] == "previous_response_not_found"
    assert caught.value.body["param"] == "previous_response_id"
    assert alice.responses.retrieve(created.id).id == created.id  # still there for its owner


def test_store_false_keeps_nothing(store_server: Server) -> None:
    client = sdk(store_server)
    created = client.responses.create(model=MODEL, input="Forget this.", store=False, max_output_tokens=4)
    assert created.to_dict()["store"] is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)


def test_input_items_come_in_pages_as_openai_pages_them(store_server: Server) -> None:
    client = sdk(store_server)
    words = ["one", "two", "three", "four", "five"]
    created = client.responses.create(
        model=MODEL, input=[{"role": "user", "content": w} for w in words], max_output_tokens=4
    )
    newest_first = client.responses.input_items.list(created.id, limit=2)
    assert [i.content[0].text for i in newest_first.data] == ["five", "four"] and newest_first.has_more
    every = [i.content[0].text for i in client.responses.input_items.list(created.id, order="asc", limit=2)]
    assert every == words  # the SDK follows `after` through every page
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.input_items.list(created.id, limit=101)
    assert caught.value.body["param"] == "limit"


def test_every_worker_writes_at_once(store_server: Server) -> None:
    client = sdk(store_server)

    def create(n: int) -> str:
        return client.responses.create(model=MODEL, input=f"Number {n}.", max_output_tokens=2).id

    # Eight at a time: within what one worker holds (4 sequences, 8 waiting) wherever the kernel
    # hands the connections, so none is refused with a 429 (sixteen could all land on one).
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(create, range(32)))
    assert len(set(ids)) == 32
    assert all(client.responses.retrieve(i).id == i for i in ids)


def test_a_stored_response_outlives_a_restart(store_backend: dict[str, str]) -> None:
    first = Server(LLM_WORKERS="1", **store_backend).wait_ready()
    try:
        created = sdk(first).responses.create(model=MODEL, input="Keep me.", max_output_tokens=4)
    finally:
        first.stop()
    again = Server(LLM_WORKERS="1", LLM_DATA_DIR=first.env["LLM_DATA_DIR"], **store_backend).wait_ready()
    try:
        assert sdk(again).responses.retrieve(created.id).output_text == created.output_text
    finally:
        again.stop()


def test_expired_responses_disappear_and_are_swept(store_backend: dict[str, str]) -> None:
    server = Server(LLM_WORKERS="1", LLM_STORE_TTL="2s", **store_backend).wait_ready()
    try:
        created = sdk(server).responses.create(model=MODEL, input="Brief.", max_output_tokens=2)
        url = store_backend.get("LLM_STORE_URL") or f"sqlite:///{server.env['LLM_DATA_DIR']}/store.sqlite3"
        url = url.replace("postgresql://", "postgresql+psycopg://")
        engine = sqlalchemy.create_engine(url)
        count = sqlalchemy.text("SELECT count(*) FROM responses WHERE id = :id")

        def rows() -> int:
            with engine.connect() as connection:
                return int(connection.execute(count, {"id": created.id}).scalar_one())

        assert rows() == 1
        deadline = time.monotonic() + 30  # 2 s to expire, a sweep every second
        while rows() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rows() == 0
        with pytest.raises(openai.NotFoundError):
            sdk(server).responses.retrieve(created.id)
        engine.dispose()
    finally:
        server.stop()


def test_with_the_store_off_nothing_is_kept_and_continuing_is_refused() -> None:
    server = Server(LLM_WORKERS="1", LLM_STORE="off").wait_ready()
    try:
        client = sdk(server)
        created = client.responses.create(model=MODEL, input="Hi.", max_output_tokens=2)
        assert created.to_dict()["store"] is False
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.retrieve(created.id)
        assert "LLM_STORE=off" in missing.value.body["message"]
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model=MODEL, input="And?", previous_response_id=created.id)
        assert refused.value.body["param"] == "previous_response_id"
        assert "LLM_STORE=off" in refused.value.body["message"]
    finally:
        server.stop()


def test_bad_queries_are_clear_400s(store_server: Server) -> None:
    client = sdk(store_server)
    created = client.responses.create(model=MODEL, input="Hi.", max_output_tokens=2)
    headers = {"Authorization": "Bearer key-alice"}
    for path, param in (
        (f"/v1/responses/{created.id}/input_items?order=sideways", "order"),
        (f"/v1/responses/{created.id}/input_items?after=msg_nope", "after"),
        (f"/v1/responses/{created.id}?stream=true", "stream"),
    ):
        answer = httpx.get(store_server.url + path, headers=headers, timeout=10)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.text
    cancel = httpx.post(f"{store_server.url}/v1/responses/{created.id}/cancel", headers=headers, timeout=10)
    assert cancel.status_code == 400 and "Only a background response" in cancel.json()["error"]["message"]
