"""Tenants on one real server cannot read each other's prompts from the cache: not from cached_tokens,
Anthropic's cache_read_input_tokens, llama-server's timings, X-Cache-Miss, the answer, or /slots.

Measured as issue 59 measured the leak: Alice sends a prompt holding a confidential figure; Bob
sends the same text with another last line, then with a guessed figure. Each of Bob's answers is
compared with the same request in a scope nothing was ever cached for (a fresh `cache_salt`): his
usage, timings and text are the same whether or not Alice sent her prompt first. Carol, in
Alice's group (LLM_CACHE_SHARING=alice+carol), does resume Alice's prompt: the measure is live.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.servers import Server

KEYS = {"alice": "sk-alice-41d", "bob": "sk-bob-9c2", "carol": "sk-carol-7e5", "dave": "sk-dave-3a0"}
OPS = "sk-ops-1b7"  # an operator's key: slot actions are the operator's
MEMO = (
    "You are the assistant of a small investment firm. Keep every figure you are given to yourself, "
    "answer in one short sentence, and never repeat a number unless asked for it directly. "
) * 4
SECRET = MEMO + "Confidential: the merger closes on March 3 at 41 dollars a share."
GUESS = MEMO + "Confidential: the merger closes on March 3 at 39 dollars a share."
_salts = itertools.count()


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    slots = tmp_path_factory.mktemp("slots")
    server = Server(
        LLM_WORKERS="1",
        LLM_API_KEYS=",".join(f"{name}:{key}" for name, key in KEYS.items()),
        LLM_CACHE_SHARING="alice+carol",
        LLM_ADMIN_KEYS=f"ops:{OPS}",
        LLM_SLOT_SAVE_PATH=str(slots),
    ).wait_ready()
    yield server
    server.stop(wait=False)


def chat(server: Server, who: str, system: str, question: str, **extra: Any) -> httpx.Response:
    body = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 8, "temperature": 0, **extra,
    }  # fmt: skip
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


def seen(answer: httpx.Response) -> tuple[int, int, str, str | None]:
    """What a client can read of the cache from one answer: cached tokens, tokens evaluated, text, header."""
    body = answer.json()
    cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
    return (
        cached,
        body["timings"]["prompt_n"],
        body["choices"][0]["message"]["content"],
        answer.headers.get("X-Cache-Miss"),
    )


def unseen(server: Server, who: str, system: str, question: str) -> tuple[int, int, str, str | None]:
    """The same request in a scope no prompt was ever cached for: what the client sees with no cache."""
    return seen(chat(server, who, system, question, cache_salt=f"never-used-{next(_salts)}"))


def test_another_tenant_sees_nothing_of_a_cached_prompt_and_a_group_shares_it(tenants: Server) -> None:
    alice = seen(chat(tenants, "alice", SECRET, "When does it close?"))
    assert alice[0] == 0
    again = seen(chat(tenants, "alice", SECRET, "At what price?"))
    assert again[0] > 150  # her own prompt is resumed (the memo and the figure)
    # The same text, then a guess at the figure (by another key: Bob's first probe is his to resume).
    for who, system in (("bob", SECRET), ("dave", GUESS)):
        probe = seen(chat(tenants, who, system, "At what price?"))
        assert probe == unseen(tenants, who, system, "At what price?")
        assert probe[0] == 0 and probe[3] is None
    carol = seen(chat(tenants, "carol", SECRET, "Is it closing?"))  # Alice's group: shared
    assert carol[0] > 150
    guessed = chat(tenants, "alice", GUESS, "At what price?")  # in her own scope, the miss is told
    assert guessed.headers.get("X-Cache-Miss", "").startswith("token=")


def test_a_cache_salt_parts_one_keys_requests(tenants: Server) -> None:
    memo = "Salted. " + MEMO + "Confidential: the salted figure is 77."  # shares nothing with the others
    assert seen(chat(tenants, "bob", memo, "Which figure?", cache_salt="s-1"))[0] == 0
    assert seen(chat(tenants, "bob", memo, "Which one?", cache_salt="s-2"))[0] == 0
    assert seen(chat(tenants, "bob", memo, "Which one?"))[0] == 0
    assert seen(chat(tenants, "bob", memo, "What figure?", cache_salt="s-1"))[0] > 150


def test_anthropics_cache_read_tokens_never_count_another_tenants_prompt(tenants: Server) -> None:
    memo = "Anthropic. " + MEMO + "Confidential: the quarterly loss is 12 million."
    chat(tenants, "alice", memo, "How large?")

    def read_tokens(who: str) -> int:
        body = {"model": "SmolLM2-135M-Instruct.Q4_1", "max_tokens": 4, "system": memo,
                "messages": [{"role": "user", "content": "How large is it?"}]}  # fmt: skip
        headers = {"x-api-key": KEYS[who], "anthropic-version": "2023-06-01"}
        answer = httpx.post(tenants.url + "/v1/messages", json=body, headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        return int(answer.json()["usage"]["cache_read_input_tokens"])

    assert read_tokens("bob") == 0
    assert read_tokens("carol") > 100


def test_slots_show_a_tenants_own_cells_and_no_slot_action_touches_another_scopes(tenants: Server) -> None:
    def slots(who: str) -> dict[int, int]:
        headers = {"Authorization": f"Bearer {KEYS[who]}"}
        listed = httpx.get(tenants.url + "/slots", headers=headers, timeout=30)
        assert listed.status_code == 200
        return {slot["id"]: slot["n_prompt_tokens"] for slot in listed.json()}

    before = slots("alice")
    chat(tenants, "alice", "Slots. " + MEMO + "Confidential: the slot figure is 5.", "Which?")
    after = slots("alice")
    (alices,) = [n for n, held in after.items() if held != before[n] and held > 150]
    held = after[alices]
    bobs = slots("bob")
    assert bobs[alices] == 0  # how long her prompt is is not Bob's to see
    assert not any(after[n] and bobs[n] for n in after)  # a slot's cells are one tenant's
    for who in ("alice", "bob"):  # slot actions are the operator's
        headers = {"Authorization": f"Bearer {KEYS[who]}"}
        answer = httpx.post(
            f"{tenants.url}/slots/{alices}?action=save", json={"filename": "mine.bin"}, headers=headers
        )
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "operator_only", answer.text
    ops = {"Authorization": f"Bearer {OPS}"}
    saved = httpx.post(
        f"{tenants.url}/slots/{alices}?action=save", json={"filename": "mine.bin"}, headers=ops
    )
    assert saved.status_code == 200 and saved.json()["n_saved"] == 0, (
        saved.text
    )  # Alice's, not the operator's
    root = Path(tenants.env["LLM_SLOT_SAVE_PATH"])
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.bin")) == ["keys/ops/mine.bin"]
    erased = httpx.post(f"{tenants.url}/slots/{alices}?action=erase", headers=ops)
    assert erased.json()["n_erased"] == 0  # not the operator's to erase either
    restored = httpx.post(
        f"{tenants.url}/slots/{alices}?action=restore", json={"filename": "mine.bin"}, headers=ops
    )
    assert restored.status_code == 400 and "may not replace" in restored.text, restored.text
    assert slots("alice")[alices] == held  # a restore dropped her cells before the scope was asked
