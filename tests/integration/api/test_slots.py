"""llama-server's slots on the real server: a slot saved, the server restarted, restored, the same answer.

Also: names that would leave LLM_SLOT_SAVE_PATH are refused, a file altered or made by
other settings is refused (never loaded), and without the setting the actions are a 501.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.servers import Server

QUESTION = [{"role": "user", "content": "Name three rivers of Europe and say one thing about each."}]


def ask(server: Server) -> dict[str, Any]:
    body = {"messages": QUESTION, "max_tokens": 24, "temperature": 0}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def act(server: Server, slot: int, action: str, filename: str | None = None) -> httpx.Response:
    body = {} if filename is None else {"filename": filename}
    return httpx.post(f"{server.url}/slots/{slot}?action={action}", json=body, timeout=60)


def test_a_saved_slot_outlives_a_restart_and_answers_as_before(tmp_path: Path) -> None:
    env = {"LLM_WORKERS": "1", "LLM_PARALLEL": "2", "LLM_SLOT_SAVE_PATH": str(tmp_path / "slots")}
    first = Server(**env).wait_ready()
    try:
        before = ask(first)
        slots = httpx.get(first.url + "/slots", timeout=10).json()
        assert [s["id"] for s in slots] == [0, 1] and not any(s["is_processing"] for s in slots)
        (held,) = [s for s in slots if s["n_prompt_tokens"]]
        saved = act(first, held["id"], "save", "rivers.bin").json()
        assert saved["id_slot"] == held["id"] and saved["n_saved"] == held["n_prompt_tokens"]
        assert saved["filename"] == "rivers.bin" and saved["n_written"] > 0 and "save_ms" in saved["timings"]
    finally:
        first.stop()
    again = Server(**env).wait_ready()
    try:
        restored = act(again, 1, "restore", "rivers.bin").json()
        assert restored["n_restored"] == held["n_prompt_tokens"] and restored["n_read"] == saved["n_written"]
        assert (
            httpx.get(again.url + "/slots", timeout=10).json()[1]["n_prompt_tokens"]
            == held["n_prompt_tokens"]
        )
        after = ask(again)  # answered from the restored cells
        assert (
            after["usage"]["prompt_tokens_details"]["cached_tokens"] == before["usage"]["prompt_tokens"] - 1
        )
        assert after["choices"][0]["message"]["content"] == before["choices"][0]["message"]["content"]
        erased = act(again, 1, "erase").json()
        assert (
            erased == {"id_slot": 1, "n_erased": held["n_prompt_tokens"] + 24 - 1} or erased["n_erased"] > 0
        )
        assert httpx.get(again.url + "/slots", timeout=10).json()[1]["n_prompt_tokens"] == 0
        # Altered, or from other settings: refused with the reason, nothing loaded.
        (tmp_path / "slots" / "rivers.bin").write_bytes(
            _altered((tmp_path / "slots" / "rivers.bin").read_bytes())
        )
        refused = act(again, 1, "restore", "rivers.bin")
        assert refused.status_code == 400 and "checksum" in refused.json()["error"]["message"]
        foreign = tmp_path / "slots" / "foreign.bin"
        foreign.write_bytes(saved_with_fingerprint(tmp_path / "slots" / "rivers.bin", "another model"))
        refused = act(again, 1, "restore", "foreign.bin")
        assert refused.status_code == 400 and "another model" in refused.json()["error"]["message"]
        assert act(again, 0, "restore", "missing.bin").status_code == 400
        assert act(again, 7, "erase").status_code == 400  # no such slot
        assert act(again, 0, "archive", "x").json()["error"]["param"] == "action"
    finally:
        again.stop()


def _altered(body: bytes) -> bytes:
    return body[:-10] + bytes(b ^ 0xFF for b in body[-10:])


def saved_with_fingerprint(path: Path, fingerprint: str) -> bytes:
    """The file at `path` with its header claiming another fingerprint."""
    magic, header, rest = path.read_bytes().split(b"\n", 2)
    fields = json.loads(header)
    fields["fingerprint"] = fingerprint
    return magic + b"\n" + json.dumps(fields).encode() + b"\n" + rest


@pytest.mark.parametrize(
    "name", ["../escape.bin", "a/b.bin", "/etc/passwd", "..", ".hidden", "", " padded", "c:x", "tab\tname"]
)
def test_file_names_that_could_leave_the_folder_are_refused(server_with_slots: Server, name: str) -> None:
    refused = act(server_with_slots, 0, "save", name)
    assert refused.status_code == 400 and refused.json()["error"]["message"] == "Invalid filename"
    assert not any(
        server_with_slots.env["LLM_SLOT_SAVE_PATH"] in str(p) for p in Path("/etc").glob("escape*")
    )


@pytest.fixture(scope="module")
def server_with_slots(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("slots") / "kept"
    server = Server(LLM_WORKERS="1", LLM_SLOT_SAVE_PATH=str(folder)).wait_ready()
    yield server
    server.stop()
    assert sorted(p.name for p in folder.parent.rglob("*") if p.is_file()) == []  # nothing written anywhere


def test_without_a_save_path_slot_actions_are_501_as_llama_servers(server: Server) -> None:
    refused = act(server, 0, "save", "x.bin")
    assert refused.status_code == 501 and "LLM_SLOT_SAVE_PATH" in refused.json()["error"]["message"]
    assert httpx.get(server.url + "/slots", timeout=10).json()[0]["id"] == 0


def test_every_workers_slots_are_listed_and_acted_on_from_any_connection(tmp_path: Path) -> None:
    server = Server(
        LLM_WORKERS="2", LLM_PARALLEL="2", LLM_SLOT_SAVE_PATH=str(tmp_path / "slots")
    ).wait_ready()
    try:
        for _ in range(4):  # fresh connections: either worker answers, and lists both
            listed = httpx.get(server.url + "/slots", timeout=10).json()
            assert [s["id"] for s in listed] == [0, 1, 2, 3]
        ask(server)
        (held,) = [s for s in httpx.get(server.url + "/slots", timeout=10).json() if s["n_prompt_tokens"]]
        for _ in range(3):  # saved from whichever worker takes the connection
            saved = act(server, held["id"], "save", "any.bin").json()
            assert saved["n_saved"] == held["n_prompt_tokens"], saved
        assert act(server, held["id"], "erase").json()["n_erased"] == held["n_prompt_tokens"]
        listed = httpx.get(server.url + "/slots", timeout=10).json()
        assert [s["n_prompt_tokens"] for s in listed] == [0, 0, 0, 0]
    finally:
        server.stop(wait=False)
