"""The Files API through the openai SDK: upload, list, download, delete; owners and limits; both stores."""

from __future__ import annotations

import os

import httpx
import openai
import pytest

from harness.servers import Server
from tests.integration.conftest import store_sdk as sdk


def test_a_file_is_uploaded_listed_downloaded_and_deleted(store_server: Server) -> None:
    client = sdk(store_server)
    payload = os.urandom(3 * 1024 * 1024 + 17)  # more than two of the store's 1 MiB chunks
    created = client.files.create(file=("data.bin", payload), purpose="user_data")
    assert created.id.startswith("file-") and created.bytes == len(payload) and created.filename == "data.bin"
    assert created.purpose == "user_data" and created.status == "processed" and created.expires_at is None
    assert client.files.retrieve(created.id).model_dump() == created.model_dump()
    assert client.files.content(created.id).read() == payload
    assert created.id in [f.id for f in client.files.list(purpose="user_data")]
    assert created.id not in [f.id for f in client.files.list(purpose="batch")]
    client.files.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(created.id)


def test_files_come_in_pages_and_can_expire(store_server: Server) -> None:
    client = sdk(store_server, "key-bob")  # bob's files only: other tests upload as alice
    ids = [client.files.create(file=(f"{n}.jsonl", b"{}\n"), purpose="batch").id for n in range(3)]
    first = client.files.list(limit=1, order="asc")
    assert [f.id for f in first.data] == ids[:1] and first.has_more
    assert [f.id for f in client.files.list(limit=1, order="asc")] == ids  # the SDK follows `after`
    timed = client.files.create(
        file=("t.jsonl", b"{}\n"), purpose="batch", expires_after={"anchor": "created_at", "seconds": 3600}
    )
    assert timed.expires_at == timed.created_at + 3600


def test_another_key_finds_no_file(store_server: Server) -> None:
    alice, bob = sdk(store_server), sdk(store_server, "key-bob")
    created = alice.files.create(file=("mine.txt", b"private"), purpose="user_data")
    for ask in (
        lambda: bob.files.retrieve(created.id),
        lambda: bob.files.content(created.id),
        lambda: bob.files.delete(created.id),
    ):
        with pytest.raises(openai.NotFoundError):
            ask()
    assert created.id not in [f.id for f in bob.files.list()]
    assert alice.files.content(created.id).read() == b"private"


def test_uploads_the_server_does_not_take_are_clear_errors(store_server: Server) -> None:
    client = sdk(store_server)
    with pytest.raises(openai.APIStatusError) as too_large:
        client.files.create(file=("big.bin", b"x" * (4 * 1024 * 1024 + 1)), purpose="batch")
    assert too_large.value.status_code == 413
    assert (
        too_large.value.body["code"] == "file_too_large"
        and "LLM_MAX_FILE_BYTES" in too_large.value.body["message"]
    )
    with pytest.raises(openai.BadRequestError) as purpose:
        client.files.create(file=("a.txt", b"a"), purpose="homework")
    assert purpose.value.body["param"] == "purpose"
    no_file = httpx.post(
        store_server.url + "/v1/files",
        data={"purpose": "batch"},
        headers={"Authorization": "Bearer key-alice"},
    )
    assert no_file.status_code == 400 and no_file.json()["error"]["param"] == "file"
    boundary = "part-boundary"
    nameless = (  # a part whose Content-Disposition names no field
        f"--{boundary}\r\nContent-Disposition: form-data\r\n\r\nbatch\r\n--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\na\r\n--{boundary}--\r\n'
    )
    answer = httpx.post(
        store_server.url + "/v1/files",
        content=nameless.encode(),
        headers={
            "Authorization": "Bearer key-alice",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    assert answer.status_code == 400 and "needs a name" in answer.json()["error"]["message"], answer.text
