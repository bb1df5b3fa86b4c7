"""A tenant is its key, not its place in the key list: remove a key and restart, and what it stored is
reachable by no other key, while every other key still reaches its own (the real server, twice, on one
store: before, key-N named a key by its place, and the next key inherited a removed key's objects)."""

from __future__ import annotations

from pathlib import Path

import httpx

from harness.servers import Server

ONE, TWO, THREE = "sk-identity-one", "sk-identity-two", "sk-identity-three"
MODEL = "SmolLM2-135M-Instruct.Q4_1"


def stored(server: Server, key: str, text: str) -> tuple[str, str]:
    """A stored Response and an uploaded file of `key`'s: their ids."""
    headers = {"Authorization": f"Bearer {key}"}
    body = {"model": MODEL, "input": text, "max_output_tokens": 16, "store": True}
    response = httpx.post(f"{server.url}/v1/responses", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    upload = httpx.post(
        f"{server.url}/v1/files", files={"file": ("notes.txt", text.encode())}, data={"purpose": "user_data"},
        headers=headers, timeout=60,
    )  # fmt: skip
    assert upload.status_code == 200, upload.text
    return response.json()["id"], upload.json()["id"]


def reaches(server: Server, key: str, ids: tuple[str, str]) -> tuple[bool, bool]:
    headers = {"Authorization": f"Bearer {key}"}
    response = httpx.get(f"{server.url}/v1/responses/{ids[0]}", headers=headers, timeout=30)
    upload = httpx.get(f"{server.url}/v1/files/{ids[1]}", headers=headers, timeout=30)
    assert {response.status_code, upload.status_code} <= {200, 404}
    return response.status_code == 200, upload.status_code == 200


def test_a_removed_keys_objects_are_reachable_by_no_other_key(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    before = Server(LLM_WORKERS="1", LLM_DATA_DIR=data, LLM_API_KEYS=f"{ONE},{TWO},{THREE}").wait_ready()
    try:
        twos, threes = stored(before, TWO, "Two's note."), stored(before, THREE, "Three's note.")
        assert reaches(before, THREE, twos) == (False, False)
    finally:
        before.stop()
    after = Server(LLM_WORKERS="1", LLM_DATA_DIR=data, LLM_API_KEYS=f"{ONE},{THREE}").wait_ready()
    try:
        assert reaches(after, THREE, threes) == (True, True)  # its own, though its place is now second
        for key in (ONE, THREE):
            assert reaches(after, key, twos) == (False, False)  # two's, now nobody's
        gone = httpx.get(f"{after.url}/v1/responses/{twos[0]}", headers={"Authorization": f"Bearer {TWO}"})
        assert gone.status_code == 401  # the removed key itself is no key now
    finally:
        log = after.output()
        after.stop(wait=False)
    assert TWO not in log and THREE not in log  # names in the log, never keys
