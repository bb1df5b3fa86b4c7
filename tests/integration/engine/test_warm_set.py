"""The warm set (LLM_WARM_SET) on the real server: an agent's preamble is cached before its first turn.

The set holds an agent's first request (a system prompt and its tools, through Anthropic's
Messages API) for one tenant's key. Once the worker says it has answered it, that tenant's
first turn (the same preamble, another question) reads the preamble from the cache, while
another tenant's identical turn reads nothing of it; with the disk tier on, the next server
reads the warm prompt back from disk rather than evaluating it again.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anthropic

from harness.servers import Server

SYSTEM = (
    "You are a careful coding agent working in a Python repository. Read files before you change "
    "them, keep every change small, run the tests after each one, and say plainly what you did. "
    "Never invent a file or a function; when something is unclear, ask."
)
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file of the repository and return its text.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "run_tests",
        "description": "Run the repository's tests and return what they printed.",
        "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
    },
]
KEYS = "alice:sk-alice-0000,bob:sk-bob-0000"


def turn(question: str) -> dict[str, Any]:
    return {
        "model": "smollm2",
        "max_tokens": 4,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": question}],
    }


def warm_set(folder: Path) -> Path:
    path = folder / "warm.jsonl"
    line = {"custom_id": "claude", "url": "/v1/messages", "key": "alice", "body": turn("hi")}

    path.write_text(json.dumps(line) + "\n")
    return path


def warmed(server: Server, timeout: float = 120) -> tuple[int, int]:
    """Once the worker has answered its warm set: the prompt tokens it cached, and those it read
    from a cache (as its log says)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = server.output()
        if "warm set: 1 of 1 requests answered" in log:
            found = re.search(r"warm set, line 1 \(/v1/messages\): (\d+) prompt tokens cached, (\d+)", log)
            assert found, log
            return int(found[1]), int(found[2])
        assert "warm set: 0 of 1" not in log, log
        time.sleep(0.2)
    raise AssertionError(f"the warm set was not answered:\n{server.output()}")


def start(folder: Path, **env: str) -> Server:
    return Server(
        LLM_MODEL_ID="smollm2", LLM_API_KEYS=KEYS, LLM_PARALLEL="2", LLM_WARM_SET=str(warm_set(folder)), **env
    ).wait_ready()


def first_turn(server: Server, key: str) -> anthropic.types.Usage:
    with anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0) as client:
        return client.messages.create(**turn("Which tests fail, and why?")).usage


def test_a_tenants_first_turn_reads_the_warm_preamble_and_another_tenants_does_not(tmp_path: Path) -> None:
    server = start(tmp_path)
    try:
        prompt, read = warmed(server)
        assert prompt > 150 and read == 0  # the preamble was evaluated: nothing was cached before
        usage = first_turn(server, "sk-alice-0000")
        assert (usage.cache_read_input_tokens or 0) >= prompt - 16  # all but the question and its turn
        other = first_turn(server, "sk-bob-0000")  # the same request from another tenant
        assert not other.cache_read_input_tokens
        assert "Traceback" not in server.output()
    finally:
        server.stop(wait=False)


def test_the_next_server_reads_the_warm_prompt_back_from_the_disk_tier(tmp_path: Path) -> None:
    disk = {"LLM_CACHE_DISK_MB": "64", "LLM_CACHE_DISK_PATH": str(tmp_path / "kv")}
    first = start(tmp_path, **disk)
    try:
        prompt, read = warmed(first)
        assert read == 0
    finally:
        first.stop()  # the stopping worker writes its cells to the disk tier
    assert list((tmp_path / "kv").glob("fp_*/*.kv"))
    again = start(tmp_path, **disk)
    try:
        prompt_again, read_again = warmed(again)
        assert prompt_again == prompt and read_again >= prompt - 1  # all but the token it answers from
        usage = first_turn(again, "sk-alice-0000")
        assert (usage.cache_read_input_tokens or 0) >= prompt - 16
    finally:
        again.stop(wait=False)
